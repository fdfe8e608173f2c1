"""ServerLimit: one bound on requests in flight, shared by event loops in several threads."""

from __future__ import annotations

import asyncio
import threading

import pytest

from data.llm.server_limit import ServerLimit, server_limit


class Gauge:
    """Counts holders inside the limit and remembers the most at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.done = 0

    async def hold(self, limit: ServerLimit, seconds: float) -> None:
        async with limit:
            with self.lock:
                self.now += 1
                self.peak = max(self.peak, self.now)
            await asyncio.sleep(seconds)
            with self.lock:
                self.now -= 1
                self.done += 1


def run_in_threads(count: int, work) -> None:
    threads = [threading.Thread(target=lambda: asyncio.run(work())) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)


def test_loops_in_several_threads_share_the_slots() -> None:
    limit, gauge = ServerLimit(3), Gauge()

    async def batch() -> None:
        await asyncio.gather(*(gauge.hold(limit, 0.01) for _ in range(20)))

    run_in_threads(4, batch)

    assert (gauge.done, gauge.peak, limit.held) == (80, 3, 0)


def test_a_cancelled_waiter_gives_up_its_place_and_loses_no_slot() -> None:
    limit, gauge = ServerLimit(1), Gauge()

    async def scenario() -> None:
        holder = asyncio.create_task(gauge.hold(limit, 0.05))
        await asyncio.sleep(0)  # the holder takes the only slot
        waiter = asyncio.create_task(gauge.hold(limit, 0.0))
        await asyncio.sleep(0.01)  # queued behind it
        waiter.cancel()
        await asyncio.gather(holder, waiter, return_exceptions=True)
        assert waiter.cancelled()
        await gauge.hold(limit, 0.0)  # the slot came back

    asyncio.run(scenario())

    assert (gauge.done, limit.held) == (2, 0)


def test_a_slot_handed_to_a_waiter_that_was_cancelled_meanwhile_is_passed_on() -> None:
    """The release schedules the hand-over in the waiter's loop; the waiter is cancelled before
    that callback runs, so the slot must go to the next waiter rather than leak."""
    limit, gauge = ServerLimit(1), Gauge()

    async def scenario() -> None:
        await limit.__aenter__()
        first = asyncio.create_task(gauge.hold(limit, 0.0))
        second = asyncio.create_task(gauge.hold(limit, 0.0))
        await asyncio.sleep(0.01)  # both queued
        await limit.__aexit__(None, None, None)  # hand-over to `first` is now in transit
        first.cancel()
        await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 5)
        assert first.cancelled()

    asyncio.run(scenario())

    assert (gauge.done, limit.held) == (1, 0)


def test_a_waiter_of_a_closed_loop_is_skipped() -> None:
    limit = ServerLimit(1)
    orphan = asyncio.new_event_loop()
    limit._waiters.append((orphan, orphan.create_future()))  # its loop died without cancelling
    orphan.close()
    limit._held = 1

    limit._release()

    assert limit.held == 0


def test_one_limit_per_server_and_size() -> None:
    assert server_limit("http://a/v1", 2) is server_limit("http://a/v1", 2)
    assert server_limit("http://a/v1", 2) is not server_limit("http://b/v1", 2)
    with pytest.raises(ValueError, match="at least one slot"):
        ServerLimit(0)
