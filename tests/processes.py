"""Background processes for tests and benchmarks: started in their own session, stopped with
their children, and a real Prefect server on a free loopback port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from data.llm import free_port

BIN = Path(sys.executable).parent


def started(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """`argv` in a session of its own, its output to `log`."""
    return subprocess.Popen(
        argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )


def stop(process: subprocess.Popen) -> None:
    """SIGTERM the process and its children; SIGKILL them after 20 s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


@contextmanager
def running_prefect_server(
    prefect_home: Path, log: Path, timeout_s: float = 120
) -> Iterator[tuple[str, dict[str, str]]]:
    """`prefect server start` until the block ends; yields its API URL, once it answers
    `/health`, and an environment that points Prefect clients at it."""
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(prefect_home), "PREFECT_API_URL": api}
    command = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    server = started(command, env, log)
    try:
        deadline = time.monotonic() + timeout_s
        while not _healthy(api):
            if server.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text()[-2000:]
                raise RuntimeError(f"no Prefect server after {timeout_s:.0f} s:\n{tail}")
            time.sleep(0.5)
        yield api, env
    finally:
        stop(server)


def _healthy(api: str) -> bool:
    try:
        return httpx.get(f"{api}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
