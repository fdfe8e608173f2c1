"""The publish gate: a scheduled run's new version waits in the Prefect UI for approval, is
published when approved and set aside when rejected (through a real Prefect server and the
`foundry serve` deployments, resumed through the API as the UI's Resume form does); and the
adhoc form's estimate, which calls no model."""

from __future__ import annotations

import shutil

import pytest

from data.export import AWAITING_APPROVAL
from tests.conftest import SAMPLE_DOCS
from tests.processes import BIN, running_prefect_server, started, stop
from tests.test_serve import wait_for

pytestmark = pytest.mark.full  # two pipeline runs through a served deployment


def test_a_version_waits_for_approval_then_is_published_or_set_aside(tmp_path, oracle_server):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.deployments import run_deployment
    from prefect.flow_runs import resume_flow_run
    from prefect.settings import PREFECT_API_URL, temporary_settings

    corpus = tmp_path / "docs"
    corpus.mkdir()
    docs = sorted(SAMPLE_DOCS.glob("*.md"))
    shutil.copy(docs[0], corpus)
    home = tmp_path / "home"
    tasksets = home / "tasksets" / "docqa"
    published = tmp_path / "published"  # approval publishes there, nothing before it
    home.mkdir()
    (home / "foundry.toml").write_text(f'[export]\npublish_to = "{published}"\n')
    log = tmp_path / "serve.log"
    with running_prefect_server(tmp_path / "prefect", tmp_path / "server.log") as (api, env):
        env = {**env, "OPENAI_BASE_URL": oracle_server.base_url, "OPENAI_API_KEY": "k"}
        serve = started([str(BIN / "foundry"), "serve", "--home", str(home)], env, log)
        try:
            with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
                for deployment in ("pipeline/nightly", "adhoc/adhoc"):  # both served
                    wait_for(
                        lambda name=deployment: client.read_deployment_by_name(name),
                        120,
                        deployment,
                        [log],
                    )

                def paused_run():
                    run = run_deployment(
                        "pipeline/nightly",
                        parameters={"sources": {"docs": [str(corpus)]}, "publish_gate": True},
                        timeout=0,
                    )
                    return wait_for(
                        lambda: (r := client.read_flow_run(run.id)).state.is_paused() and r,
                        300,
                        "paused run",
                        [log],
                    )

                # the adhoc form's plan_only: the estimate as an artifact, no model called
                planned = run_deployment(
                    "adhoc/adhoc",
                    parameters={"sources": {"docs": [str(corpus)]}, "plan_only": True},
                    timeout=300,
                    poll_interval=2,
                )
                assert planned.state.is_completed(), f"{planned.state}\n{log.read_text()[-3000:]}"
                plan = client.read_artifacts(
                    artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["foundry-plan"]))
                )
                assert "plan: " in plan[0].data and "docs" in plan[0].data
                assert oracle_server.requests == [] and not (home / "lake" / "tasks").exists()

                def decided(run, answer: dict):
                    """The paused run resumed with `answer`, once it has ended."""
                    resume_flow_run(run.id, run_input=answer)
                    return wait_for(
                        lambda: (r := client.read_flow_run(run.id)).state.is_final() and r,
                        120,
                        "decided run",
                        [log],
                    )

                first = paused_run()
                waiting = tasksets / "v0001"
                assert (waiting / AWAITING_APPROVAL).is_file()
                assert not (tasksets / "latest").exists()  # not published yet
                assert not published.exists()
                note = client.read_artifacts(
                    artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["foundry-publish"]))
                )[0]
                assert "v0001 waits for approval" in note.data and "the first version" in note.data
                done = decided(first, {"approve": True, "note": "looks right"})
                assert done.state.is_completed(), done.state
                assert (tasksets / "latest").resolve() == waiting.resolve()
                assert not (waiting / AWAITING_APPROVAL).exists()
                assert (published / "v0001" / "manifest.json").is_file()

                shutil.copy(docs[1], corpus)  # new material: a new version to decide on
                second = paused_run()
                assert (tasksets / "v0002" / AWAITING_APPROVAL).is_file()
                done = decided(second, {"approve": False, "note": "too few"})
                assert done.state.is_cancelled() and "too few" in done.state.message
                assert (tasksets / "latest").resolve() == waiting.resolve()
                assert (tasksets / "v0002.rejected").is_dir() and not (tasksets / "v0002").exists()
                assert not (published / "v0002").exists()
        finally:
            stop(serve)
