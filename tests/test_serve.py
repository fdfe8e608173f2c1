"""The deployments through a real Prefect server: `foundry serve` registers `nightly` (on its
schedule) and `adhoc`; an adhoc run triggered through the API with parameters completes and
leaves the run's artifacts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from flows.artifacts import KEYS
from sources import names as source_names
from tests.conftest import SAMPLE_DOCS
from tests.processes import BIN, running_prefect_server, started, stop


def wait_for(check, seconds: float, what: str, logs: list[Path]):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            found = check()
        except Exception:  # noqa: BLE001 - not up yet
            found = None
        if found:
            return found
        time.sleep(1)
    tails = "\n".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for log in logs)
    pytest.fail(f"no {what} after {seconds:.0f} s\n{tails}")


@pytest.fixture
def prefect_server(tmp_path):
    with running_prefect_server(tmp_path / "prefect", tmp_path / "server.log") as server:
        yield server


def test_serve_registers_the_deployments_and_runs_an_adhoc_backfill(
    prefect_server, oracle_server, tmp_path
):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    api, env = prefect_server
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for doc in sorted(SAMPLE_DOCS.glob("*.md"))[:2]:
        shutil.copy(doc, corpus)
    env = {**env, "OPENAI_BASE_URL": oracle_server.base_url, "OPENAI_API_KEY": "test-key"}
    log = tmp_path / "serve.log"
    home = tmp_path / "home"
    serve = started([str(BIN / "foundry"), "serve", "--home", str(home)], env, log)
    try:
        with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
            adhoc = wait_for(
                lambda: client.read_deployment_by_name("adhoc/adhoc"), 120, "deployment", [log]
            )
            nightly = client.read_deployment_by_name("pipeline/nightly")
            assert nightly.schedules[0].schedule.cron == "0 3 * * *"
            schema = adhoc.parameter_openapi_schema
            form = schema["properties"]
            assert {"sources", "kinds", "since", "max_chunks", "band_low", "solver_model"} <= set(
                form
            )
            # a list of items for each registered source type
            assert set(schema["definitions"]["SourceLists"]["properties"]) == set(source_names())
            assert {"format": "date", "type": "string"} in form["since"]["anyOf"]
            run = run_deployment(
                "adhoc/adhoc",
                parameters={
                    "sources": {"docs": [str(corpus)]},
                    "kinds": ["doc_qa"],
                    "since": "2026-01-01",
                    "max_chunks": 3,
                },
                timeout=600,
                poll_interval=2,
            )
            assert run.state.is_completed(), f"{run.state}\n{log.read_text()[-3000:]}"
            artifacts = client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=list(KEYS)))
            )
        assert {a.key for a in artifacts} == set(KEYS)
        assert (home / "tasksets" / "docqa" / "latest" / "manifest.json").is_file()
        os.kill(serve.pid, signal.SIGINT)  # Ctrl-C stops serving within seconds, with 130
        assert serve.wait(timeout=30) == 130, log.read_text()[-2000:]
    finally:
        stop(serve)


def test_serve_stops_on_sigterm_with_143(prefect_server, tmp_path):
    api, env = prefect_server
    log = tmp_path / "serve.log"
    serve = started([str(BIN / "foundry"), "serve", "--home", str(tmp_path / "home")], env, log)
    try:
        wait_for(lambda: "being served" in log.read_text(), 120, "serving", [log])
        os.kill(serve.pid, signal.SIGTERM)
        assert serve.wait(timeout=30) == 143, log.read_text()[-2000:]
    finally:
        stop(serve)


@pytest.mark.full
def test_deployments_for_a_work_pool_run_on_its_worker(prefect_server, oracle_server, tmp_path):
    """`foundry serve --pool` registers the deployments for a work pool, its flows loaded from
    this checkout; a worker of the pool (on any host with the checkout) runs them."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    api, env = prefect_server
    env = {**env, "OPENAI_BASE_URL": oracle_server.base_url, "OPENAI_API_KEY": "test-key"}
    home = tmp_path / "home"
    prefect = str(BIN / "prefect")
    for name in ("foundry", "gpu"):
        pool = ["work-pool", "create", name, "--type", "process"]
        subprocess.run([prefect, *pool], env=env, check=True, capture_output=True, timeout=120)
    config = tmp_path / "foundry.toml"
    config.write_text('[serve]\ntrain_pool = "gpu"\n')
    command = [str(BIN / "foundry"), "serve", "--pool", "foundry", "--home", str(home)]
    deployed = subprocess.run(
        [*command, "--config", str(config)], env=env, capture_output=True, text=True, timeout=180
    )
    assert deployed.returncode == 0, deployed.stderr[-3000:]
    assert "deployed adhoc/adhoc (work pool foundry)" in deployed.stdout
    assert "deployed train/train (work pool gpu)" in deployed.stdout
    with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        adhoc = client.read_deployment_by_name("adhoc/adhoc")
        assert adhoc.work_pool_name == "foundry"
        assert adhoc.entrypoint == "flows/deployments.py:adhoc_flow"
        nightly = client.read_deployment_by_name("pipeline/nightly")
        assert nightly.work_pool_name == "foundry" and nightly.schedules
        train = client.read_deployment_by_name("train/train")
        assert train.work_pool_name == "gpu" and train.entrypoint == "flows/train.py:train_flow"
        loop = client.read_deployment_by_name("loop/loop")
        assert loop.work_pool_name == "foundry"
        assert loop.parameters["trainer"] == "deployment"
        assert loop.parameters["train_deployment"] == "train/train"
        run = client.create_flow_run_from_deployment(
            adhoc.id,
            parameters={"sources": {"docs": [str(SAMPLE_DOCS / "river-kelm.md")]}, "max_chunks": 2},
        )
    log = tmp_path / "worker.log"
    worker = started([prefect, "worker", "start", "--pool", "foundry", "--run-once"], env, log)
    try:
        assert worker.wait(timeout=600) == 0, log.read_text()[-3000:]
    finally:
        stop(worker)
    with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        state = client.read_flow_run(run.id).state
    assert state.is_completed(), f"{state}\n{log.read_text()[-3000:]}"
    assert (home / "tasksets" / "docqa" / "latest" / "manifest.json").is_file()
