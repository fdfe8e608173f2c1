"""The deployments through a real Prefect server: `foundry serve` registers `nightly` (on its
schedule) and `adhoc`; an adhoc run triggered through the API with parameters completes and
leaves the run's artifacts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from data.embedded import free_port
from flows.artifacts import KEYS
from tests.conftest import SAMPLE_DOCS

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def started(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


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
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": api}
    log = tmp_path / "server.log"
    server = started(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env,
        log,
    )
    try:
        wait_for(lambda: httpx.get(f"{api}/health").status_code == 200, 120, "server", [log])
        yield api, env
    finally:
        stop(server)


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
            assert {"docs", "max_chunks", "band_low", "solver_model", "max_tokens"} <= set(
                adhoc.parameter_openapi_schema["properties"]
            )
            run = run_deployment(
                "adhoc/adhoc",
                parameters={"docs": [str(corpus)], "max_chunks": 3},
                timeout=600,
                poll_interval=2,
            )
            assert run.state.is_completed(), f"{run.state}\n{log.read_text()[-3000:]}"
            artifacts = client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=list(KEYS)))
            )
        assert {a.key for a in artifacts} == set(KEYS)
        assert (home / "tasksets" / "docqa" / "latest" / "manifest.json").is_file()
    finally:
        stop(serve)
