"""The embedded server's readiness probe generates: a server that lists its model and then dies
on its first completion (as a build with instructions the CPU cannot run does) is caught at
start, once, with the cause in words."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from data.llm import EmbeddedModelError, free_port, supervised_server

ROOT = Path(__file__).resolve().parent.parent


def dying_server(port: int, *how: str) -> list[str]:
    return [sys.executable, "-m", "tests.fakes.dying_server", "--port", str(port), *how]


def start(command: list[str], port: int, log: Path) -> None:
    with supervised_server(command, port, log):
        pytest.fail("a server that cannot generate was taken for ready")


def test_a_server_that_dies_on_its_first_completion_is_not_ready(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    port = free_port()
    log = tmp_path / "server.log"
    started = time.monotonic()

    with pytest.raises(EmbeddedModelError) as caught:
        start(dying_server(port, "--on", "completion", "--signal", "SIGILL"), port, log)

    message = str(caught.value)
    assert "killed by SIGILL" in message
    assert "CPU instructions this machine cannot run" in message and "make install" in message
    assert "dying as asked" in message  # the server's last words, from its log
    assert time.monotonic() - started < 30  # not the whole start-up timeout


def test_a_server_that_dies_at_start_says_its_exit_code(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    port = free_port()

    with pytest.raises(EmbeddedModelError, match="exited with code 3"):
        start(dying_server(port, "--on", "start", "--exit-code", "3"), port, tmp_path / "log")


# a run whose stop takes a while (a stage finishing its batch) with the embedded server up
STOPPING_SLOWLY = """
import signal, sys, time
from data.llm.embedded import supervised_server
port = int(sys.argv[1])
command = [sys.executable, "-m", "tests.fakes.dying_server", "--port", str(port), "--on", "never"]
with supervised_server(command, port, None):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(4)
"""


def test_a_ctrl_c_to_the_command_does_not_kill_its_model_server(tmp_path):
    """The terminal sends Ctrl-C to the command's whole process group; the model server is in a
    session of its own, so it is not killed (and restarted) while the command stops."""
    command = [sys.executable, "-c", STOPPING_SLOWLY, str(free_port())]
    run = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert run.stdout.readline().strip() == "ready"
    os.killpg(run.pid, signal.SIGINT)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 0 and "restarting" not in stderr and "killed" not in stderr, stderr
