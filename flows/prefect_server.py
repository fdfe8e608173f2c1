"""The Prefect API a `foundry` command's flows report to: the configured server
(PREFECT_API_URL), else a temporary server of the process's own, in a session of its own.

Prefect's own temporary server starts in the command's process group, so the Ctrl-C a terminal
sends to the whole group (or `timeout`'s SIGTERM) stopped it under the run: the flow's last
state reports then retried against a dead server for minutes and ended in tracebacks. Started
here in a session of its own, the server gets no signal meant for the command; the command stops
it when the process exits (one server however many commands the process runs), and Linux stops
it should the command be killed outright.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import prefect
from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

from data.llm import die_with_parent, free_port, stop_process

STARTUP_TIMEOUT_S = 60.0
PORT_ATTEMPTS = 3
_started: list[tuple[subprocess.Popen, str]] = []  # this process's server, once started


@contextmanager
def prefect_api() -> Iterator[str]:
    """Within this, flows report to the configured Prefect API, or to this process's own
    temporary server (started on first use); child processes are pointed at it too."""
    configured = PREFECT_API_URL.value()
    if configured:
        yield configured
        return
    url = _own_server()
    before = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    try:
        with temporary_settings({PREFECT_API_URL: url}):
            yield url
    finally:
        if before is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = before


def _own_server() -> str:
    """The URL of this process's temporary server, started now if it is not running; on a
    port another process took between its choice and the server's bind, on another port."""
    if _started and _started[0][0].poll() is None:
        return _started[0][1]
    _started.clear()
    attempts = 0
    while True:
        attempts += 1
        port = free_port()
        process = _launch(port)
        url = f"http://127.0.0.1:{port}/api"
        try:
            _wait_until_healthy(process, url)
        except _ExitedEarly:
            if attempts == PORT_ATTEMPTS:
                raise
            continue
        except BaseException:
            stop_process(process)
            raise
        _started.append((process, url))
        return url


def _launch(port: int) -> subprocess.Popen:
    environment = {
        **os.environ,
        **get_current_settings().to_environment_variables(exclude_unset=True),
        "PREFECT_UI_ENABLED": "0",  # as Prefect starts its own temporary server
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
    }
    environment.pop("PREFECT_API_URL", None)
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(prefect.__module_path__.parent),
        "--factory",
        "prefect.server.api.server:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "error",
        "--lifespan",
        "on",
    ]
    process = subprocess.Popen(
        command,
        env=environment,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # no signal sent to the command's group reaches it
        preexec_fn=die_with_parent,
    )
    atexit.register(stop_process, process)
    return process


class _ExitedEarly(RuntimeError):
    """The server process ended before it answered (its port taken, most often)."""


def _wait_until_healthy(process: subprocess.Popen, url: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise _ExitedEarly(f"the temporary Prefect server exited {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the temporary Prefect server did not answer within {STARTUP_TIMEOUT_S}s")
