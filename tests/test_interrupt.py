"""Ctrl-C (SIGINT) or a scheduler's SIGTERM in the middle of a stage stops `foundry run` within
seconds with 130 / 143, the run recorded as interrupted; the next run completes the work without
repeating what was done. The signal goes to the run's whole process group, as a terminal's
Ctrl-C and `timeout` send it: the servers the run started must not die under it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from data.lake import Lake
from data.llm import PROBE_MESSAGES, request_key
from data.repos import build_sample_repo
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
    env.pop("PREFECT_API_URL", None)  # the run starts its own Prefect server, as a user's does
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
        os.killpg(run.pid, signum)  # the run's process group, as a terminal signals it
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
    assert terminal  # (none at all would pass the next line)
    twice = [k for k, n in Counter((r["stage"], r["item_id"]) for r in terminal).items() if n > 1]
    assert twice == []  # no item was finished twice
    assert [r["state"] for r in Lake(home).runs()] == ["interrupted", "completed"]


# a stage's worker thread running a command in the sandbox, the main thread waiting on it
SANDBOXED_STAGE = """
import sys, threading, time
from pathlib import Path
from data.runtime import interrupt
from data.runtime.sandbox import Limits, Sandbox

ended = []

def stage():
    tree = Path(sys.argv[1])
    try:
        with Sandbox(tree, Limits(wall_s=300)) as sandbox:
            print("started", flush=True)
            sandbox.run(["sleep", "300"])
        ended.append("finished")
    except interrupt.Interrupted as stop:
        ended.append(f"interrupted: {stop}")

with interrupt.stop_on_signals():
    worker = threading.Thread(target=stage)
    worker.start()
    while not ended:  # (a join the signal interrupts can leave the thread looking ended)
        try:
            time.sleep(0.1)
        except KeyboardInterrupt:
            pass
print(ended[0], flush=True)
"""


def test_a_signal_stops_a_command_in_the_sandbox_and_leaves_nothing_running(tmp_path):
    """The sandbox's command is in a session of its own, out of the signal's reach: the stage
    waiting on it sees the stop request, kills the command and says it was interrupted. What
    is checked is the stage's own process tree (the command and the sandbox around it, seen
    under the stage before the signal), never the machine's other processes."""
    (tmp_path / "tree").mkdir()
    stage = subprocess.Popen(
        [sys.executable, "-c", SANDBOXED_STAGE, str(tmp_path / "tree")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert stage.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 10
    tree = descendants(stage.pid)  # the command running, and the sandbox around it
    while SLEEP not in [command for *_, command in tree.values()]:
        assert time.monotonic() < deadline, f"no {SLEEP!r} under the stage: {tree}"
        time.sleep(0.05)
        tree = descendants(stage.pid)
    os.killpg(stage.pid, signal.SIGINT)
    try:
        out, _ = stage.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(stage.pid, signal.SIGKILL)
        pytest.fail("the sandboxed command ran on after the signal")
    assert out.strip() == "interrupted: stopped while running sleep in the sandbox"
    # the stage's own processes, each known by its start time as well as its pid (the pid of
    # one that ended may be another's now); another program's `sleep 300` is none of them
    now = processes()
    running = {
        pid: command
        for pid, (started, state, command) in tree.items()
        if pid in now and now[pid][0] == started and now[pid][1] != "Z"  # (Z: ended, unreaped)
    }
    assert running == {}


SLEEP = "sleep 300"


def processes() -> dict[int, tuple[str, str, str]]:
    """Every process now, from /proc: pid -> (start time, state, command line)."""
    return {pid: seen[:3] for pid, seen in _proc().items()}


def descendants(root: int) -> dict[int, tuple[str, str, str]]:
    """The processes under `root` now (its children, theirs, and so on): pid -> (start time,
    state, command line)."""
    seen = _proc()
    children: dict[int, list[int]] = {}
    for pid, (*_, parent) in seen.items():
        children.setdefault(parent, []).append(pid)
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found[pid] = seen[pid][:3]
        todo += children.get(pid, [])
    return found


def _proc() -> dict[int, tuple[str, str, str, int]]:
    """pid -> (start time, state, command line, parent's pid) of every process /proc shows."""
    seen = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        fields = text[text.rindex(")") + 2 :].split()  # fields 3 on, after the command's name
        state, parent, started = fields[0], int(fields[1]), fields[19]  # fields 3, 4 and 22
        seen[int(stat.parent.name)] = (
            started,
            state,
            command.replace(b"\0", b" ").decode().strip(),
            parent,
        )
    return seen


CODE_RUN_CONFIG = """
[code]
max_functions = 2
max_bugs = 1
max_replays = 2
[calibrate]
method = "fixed"
k = 2
"""


def started_run(tmp_path: Path, server: FakeOpenAIServer, inputs: list[str], config: str):
    """A `foundry run` over `inputs` as a user starts it (its own Prefect server), with a list
    that its stderr lines are appended to as they come."""
    (tmp_path / "foundry.toml").write_text(config)
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"}
    env.pop("PREFECT_API_URL", None)
    command = [sys.executable, "-m", "flows.cli", "run", "--home", str(tmp_path / "home")]
    command += ["--config", str(tmp_path / "foundry.toml"), *inputs]
    run = subprocess.Popen(
        command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(run.stderr), daemon=True)
    reader.start()
    return run, lines, reader


@pytest.mark.full
@pytest.mark.parametrize(
    ("inputs", "config", "when"),
    [
        pytest.param("repo", CODE_RUN_CONFIG, r"^replay: ", id="replaying commits in the sandbox"),
        pytest.param("repo", CODE_RUN_CONFIG, r"^calibrate: ", id="calibrating code tasks"),
        pytest.param("docs", SMALL_RUN_CONFIG, r"^repair: ", id="repairing document tasks"),
    ],
)
def test_a_signal_late_in_a_run_stops_it_in_seconds(tmp_path, inputs, config, when):
    """Ctrl-C to the run's process group, in a sandbox stage or the repair loop: the run stops
    within seconds with the one line, no traceback, no server restarted under it; the next
    run finishes."""
    args = ["--repo", str(build_sample_repo(tmp_path / "ledgerline"))] if inputs == "repo" else DOCS
    with FakeOpenAIServer(Oracle(), latency_s=0.05) as server:
        run, lines, reader = started_run(tmp_path, server, args, config)
        deadline = time.monotonic() + 400
        while not any(re.match(when, line) for line in lines):
            assert run.poll() is None, f"the run ended before {when!r}: {lines[-20:]}"
            assert time.monotonic() < deadline, f"the run never reached {when!r}"
            time.sleep(0.05)
        os.killpg(run.pid, signal.SIGINT)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            pytest.fail(f"the run did not stop within 30 s of the signal: {lines[-20:]}")
        reader.join()
        stderr = "".join(lines)
        assert run.returncode == 130, stderr[-2000:]
        assert "Traceback" not in stderr and "restarting" not in stderr, stderr[-2000:]
        assert lines[-1].startswith("foundry: stopped")
        again, lines, reader = started_run(tmp_path, server, args, config)
        assert again.wait(timeout=400) == 0, "".join(lines)[-2000:]
    assert [r["state"] for r in Lake(tmp_path / "home").runs()] == ["interrupted", "completed"]
