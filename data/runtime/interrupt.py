"""Stopping on Ctrl-C or SIGTERM: one flag for the process, raised by the signal handler.

The main thread gets KeyboardInterrupt at once (for SIGTERM too), so whatever it waits on is
left and every `finally` runs (the embedded server is stopped, the run is marked interrupted).
Work in other threads (stage batches) polls `requested()`: a batch cancels its requests in
flight, writes what its finished items produced, and raises `Interrupted`; what was not
finished stays pending for the next run. A second Ctrl-C while stopping exits at once.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_flag = threading.Event()
_received: list[int] = []


class Interrupted(Exception):
    """Work stopped early because the process was asked to stop."""


def requested() -> bool:
    """Whether the process was asked to stop."""
    return _flag.is_set()


def request(signum: int) -> None:
    """Ask for a stop as the signal `signum` would (for signals caught by another handler,
    such as Prefect's for SIGTERM inside a flow run)."""
    if not _flag.is_set():
        _received.append(signum)
        _flag.set()


def exit_code() -> int:
    """The conventional exit status for the signal received: 128 + its number (130, 143)."""
    return 128 + (_received[0] if _received else signal.SIGINT)


def _handle(signum: int, frame: FrameType | None) -> None:
    if _flag.is_set():
        if signum == signal.SIGINT:  # Ctrl-C again while stopping: leave now
            os._exit(exit_code())  # (the embedded server dies with us)
        return  # SIGTERM again: Prefect passes on one it caught itself; stopping goes on
    request(signum)
    raise KeyboardInterrupt  # the main thread leaves what it waits on


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within this (main thread only), SIGINT and SIGTERM request a stop as described above."""
    previous = {sig: signal.signal(sig, _handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
