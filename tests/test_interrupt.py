"""Ctrl-C (SIGINT) or a scheduler's SIGTERM in the middle of a stage stops `foundry run` within
seconds with 130 / 143, the run recorded as interrupted; the next run completes the work without
repeating what was done."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from data.lake import Lake
from data.llm_cache import request_key
from data.model_servers import PROBE_MESSAGES
from tests.conftest import SAMPLE_DOCS, SMALL_RUN_CONFIG
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle

ROOT = Path(__file__).resolve().parent.parent
DOCS = [str(p) for p in sorted(SAMPLE_DOCS.glob("*.md"))[:3]]
IN_FLIGHT = 16  # requests a stop can cut off: at most every role's concurrency limit
MID_RUN = 20  # requests answered before the signal: the run is in its LLM stages


def foundry_run(home: Path, server: FakeOpenAIServer) -> subprocess.Popen:
    (home.parent / "foundry.toml").write_text(SMALL_RUN_CONFIG)
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
    command = [sys.executable, "-m", "flows.cli", "run", "--home", str(home), "--kind", "doc_qa"]
    command += ["--config", str(home.parent / "foundry.toml"), *DOCS]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def keys(server: FakeOpenAIServer, start: int, end: int | None = None) -> list[str]:
    """The keys of the LLM requests in that range (each run's probes of the server left out:
    they are asked anew by every run)."""
    bodies = server.requests[start:end]
    return [request_key(b) for b in bodies if b["messages"] != PROBE_MESSAGES]


@pytest.mark.parametrize(
    ("signum", "status"),
    [(signal.SIGINT, 130), pytest.param(signal.SIGTERM, 143, marks=pytest.mark.full)],
)
def test_a_signal_mid_stage_stops_the_run_and_the_next_run_finishes_it(tmp_path, signum, status):
    home = tmp_path / "home"
    with FakeOpenAIServer(Oracle(), latency_s=0.05) as server:
        run = foundry_run(home, server)
        deadline = time.monotonic() + 240
        while len(server.requests) < MID_RUN and run.poll() is None:
            assert time.monotonic() < deadline, "the run never reached its LLM stages"
            time.sleep(0.05)
        assert run.poll() is None, "the run ended before it could be interrupted"
        os.kill(run.pid, signum)
        try:
            _, stderr = run.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            pytest.fail("the run did not stop within 30 s of the signal")
        first_run = len(server.requests)

        assert run.returncode == status, stderr[-2000:]
        assert "Traceback" not in stderr
        assert stderr.strip().splitlines()[-1].startswith("foundry: stopped")
        lake = Lake(home)
        assert [r["state"] for r in lake.runs()] == ["interrupted"]
        assert not (home / "tasksets").exists()  # it stopped before the export

        again = foundry_run(home, server)
        _, stderr = again.communicate(timeout=300)
        assert again.returncode == 0, stderr[-2000:]

    repeated = set(keys(server, 0, first_run)) & set(keys(server, first_run))
    assert len(repeated) <= IN_FLIGHT  # only what was cut off in flight was asked again
    terminal = Lake(home).rows(
        "SELECT stage, item_id FROM status WHERE status IN ('done', 'rejected')"
    )
    twice = [k for k, n in Counter((r["stage"], r["item_id"]) for r in terminal).items() if n > 1]
    assert twice == []  # no item was finished twice
    assert [r["state"] for r in Lake(home).runs()] == ["interrupted", "completed"]
