"""A test run's outcome as the grader reads it, whatever the runner (pytest, Node's test
runner), and the pipe reader that brings a runner's outcome records out of the sandbox."""

from __future__ import annotations

import os
import select
import threading
from dataclasses import dataclass, field

from .sandbox import Completed

Outcome = str  # passed | failed | error | skipped | incomplete (set up, never run)


def rank(outcome: object) -> int:
    """How well a test went, for the grader: passed above skipped above anything else."""
    return {"passed": 2, "skipped": 1}.get(str(outcome), 0)


MAX_STREAM_BYTES = 64 * 1024 * 1024
DRAIN_S = 2.0  # after the command ends, how long the stream may still take to arrive


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a test class, whatever pytest makes of its name

    outcomes: dict[str, Outcome]
    completed: Completed
    tampered: str = ""  # the evidence that the outcomes cannot be believed; then none passes
    # why the runner's end record never came (killed, crashed, timed out): then none passes either,
    # since the outcomes before it could have been written by anything in the process
    incomplete: str = ""

    def passed(self) -> set[str]:
        if self.tampered or self.incomplete:
            return set()
        return {test for test, outcome in self.outcomes.items() if outcome == "passed"}


@dataclass
class StreamReader:
    """Reads the pipe in a thread while the command runs (a full pipe would block it)."""

    fd: int
    data: bytearray = field(default_factory=bytearray)
    _closed: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while not self._closed.is_set() or select.select([self.fd], [], [], 0)[0]:
                if not select.select([self.fd], [], [], 0.1)[0]:
                    continue
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    return  # every write end is closed
                self.data += chunk[: MAX_STREAM_BYTES - len(self.data)]
        finally:
            os.close(self.fd)

    def collect(self) -> bytes:
        """What arrived, once the writers are gone (or after `DRAIN_S`: a process the tests
        forked may hold the pipe open)."""
        self._thread.join(DRAIN_S)
        self._closed.set()
        self._thread.join()
        return bytes(self.data)
