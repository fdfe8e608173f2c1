"""kill -9 at random points: `foundry run` killed with its whole process tree mid-run, then run
again, must end where an uninterrupted run ends: the same tasks and taskset, every shard and
the catalog readable, and no LLM request repeated beyond those in flight at the kill."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data.lake import Lake
from data.llm_cache import request_key
from data.model_servers import PROBE_MESSAGES
from tests.conftest import SAMPLE_DOCS, SMALL_RUN_CONFIG, run_outcome
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle

pytestmark = pytest.mark.full  # whole runs killed and resumed: `make test-full`

ROOT = Path(__file__).resolve().parent.parent
DOCS = [str(p) for p in sorted(SAMPLE_DOCS.glob("*.md"))[:3]]
CONFIG = SMALL_RUN_CONFIG + "[roles.solver]\nmax_concurrency = 4\n"
# where the kill lands, as a share of the reference run's time; `make test-full` sets
# FOUNDRY_CRASH_SEEDS=3,11,17,23 (each adds about a minute on 2 cores)
SEEDS = [int(s) for s in os.environ.get("FOUNDRY_CRASH_SEEDS", "3").split(",")]
IN_FLIGHT = 16  # requests a kill can cut off: at most every role's concurrency limit


def foundry_run(home: Path, config: Path, server: FakeOpenAIServer) -> subprocess.Popen:
    """`foundry run` on three documents, every role on `server`, in a process group of its
    own (so a kill takes the Prefect server and any child with it). Its Prefect home is
    `home`'s sibling `prefect` (a module fixture runs before the isolating one), its output
    goes to the sibling `run.log`, appended to by every run."""
    home.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"}
    env["PREFECT_HOME"] = str(home.parent / "prefect")
    command = [sys.executable, "-m", "flows.cli", "run", "--home", str(home)]
    command += ["--config", str(config), "--kind", "doc_qa", *DOCS]
    with (home.parent / "run.log").open("a") as log:
        return subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def finished(process: subprocess.Popen, home: Path) -> None:
    """`process` ended well, else its output's end is the failure's message."""
    status = process.wait(timeout=600)
    assert status == 0, (home.parent / "run.log").read_text()[-4000:]


def requests_made(server: FakeOpenAIServer, start: int, end: int | None = None) -> list[str]:
    """The keys of the LLM requests the server got in that range (each run's probes of the
    server left out: they are asked anew by every run)."""
    bodies = [
        {k: v for k, v in r.items() if k != "stream"}
        for r in server.requests[start:end]
        if r["messages"] != PROBE_MESSAGES
    ]
    return [request_key(body) for body in bodies]


@pytest.fixture(scope="module")
def oracle():
    with FakeOpenAIServer(Oracle(), latency_s=0.01) as server:
        yield server


@pytest.fixture(scope="module")
def uninterrupted(oracle, tmp_path_factory):
    """The reference: one run straight through, its duration and its outcome."""
    root = tmp_path_factory.mktemp("reference")
    config = root / "foundry.toml"
    config.write_text(CONFIG)
    started = time.monotonic()
    finished(foundry_run(root / "home", config, oracle), root / "home")
    return time.monotonic() - started, run_outcome(root / "home")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_run_killed_at_a_random_point_resumes_to_the_same_result(
    seed, oracle, uninterrupted, tmp_path
):
    duration, (tasks, exported) = uninterrupted
    assert tasks and exported
    config = tmp_path / "foundry.toml"
    config.write_text(CONFIG)
    home = tmp_path / "home"
    before = len(oracle.requests)
    victim = foundry_run(home, config, oracle)
    time.sleep(random.Random(seed).uniform(0.3, 0.8) * duration)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=60)
    killed_at = len(oracle.requests)

    for shard in (home / "lake").rglob("*.parquet"):  # whatever was written is whole
        pq.read_table(shard)
    Lake(home).rows("SELECT count(*) AS n FROM status")  # the catalog opens

    finished(foundry_run(home, config, oracle), home)
    assert run_outcome(home) == (tasks, exported)
    # the cache: a request made before the kill is not made again, bar those cut off in flight
    first, second = requests_made(oracle, before, killed_at), requests_made(oracle, killed_at)
    repeated = set(first) & set(second)
    assert len(repeated) <= IN_FLIGHT, json.dumps(sorted(repeated)[:3])
