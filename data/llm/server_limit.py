"""How many requests may be in flight to one model server, counted across the whole process.

A stage batch runs its own event loop (in a thread of the task runner), so an
`asyncio.Semaphore` per client would bound only that batch: `workers` batches at once would put
`workers` times `max_concurrency` requests on the server. A `ServerLimit` is shared by every
client, thread and event loop of the process. Slots go to waiters first come, first served, and
a released slot is handed straight to the next waiter, in that waiter's own loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from types import TracebackType

_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]


class ServerLimit:
    """An async context manager that admits at most `size` holders at once, from any loop."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a server limit needs at least one slot, not {size}")
        self.size = size
        self._held = 0
        self._waiters: deque[_Waiter] = deque()
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """Slots taken now (a slot being handed over counts as taken)."""
        with self._lock:
            return self._held

    async def __aenter__(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._held < self.size and not self._waiters:
                self._held += 1
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            self._give_up((loop, waiter))
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._release()

    def _give_up(self, entry: _Waiter) -> None:
        """A cancelled waiter leaves the queue; if a slot already reached it, pass it on."""
        with self._lock:
            try:
                self._waiters.remove(entry)
                return
            except ValueError:
                pass  # a slot was handed to it
        waiter = entry[1]
        if waiter.done() and not waiter.cancelled():
            self._release()
        else:
            waiter.cancel()  # the hand-over still in transit finds it cancelled and passes it on

    def _release(self) -> None:
        with self._lock:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(self._hand_over, waiter)
                    return
                except RuntimeError:  # that loop is closed: nobody waits there any more
                    continue
            self._held -= 1

    def _hand_over(self, waiter: asyncio.Future[None]) -> None:
        """In the waiter's loop: give it the slot, or pass the slot on if it gave up."""
        if waiter.done():
            self._release()
        else:
            waiter.set_result(None)


_limits: dict[tuple[str, int], ServerLimit] = {}
_limits_lock = threading.Lock()


def server_limit(base_url: str, size: int) -> ServerLimit:
    """The process-wide limit of `size` requests in flight to the server at `base_url`."""
    key = (base_url, size)
    with _limits_lock:
        if key not in _limits:
            _limits[key] = ServerLimit(size)
        return _limits[key]
