"""Replaying tool calls on a world: run a call sequence from a snapshot and keep each call's
result message and the final state.

The world verifier replays an attempt's calls, a generator replays its gold calls, and the
self-check (`harnesses.world_check`) replays both and their plausible wrong variants. Worlds
are kept open between replays (`IDLE_WORLDS` of them), so scoring the same few worlds over and
over does not pay for opening a database each time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from data.records import Task
from harnesses.world import Snapshot, World, WorldSpec

Call = tuple[str, dict[str, Any]]  # tool name, arguments
IDLE_WORLDS = 8  # worlds kept open for the next replay, in all
_IDLE: list[World] = []  # least recently used first
_IDLE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Replay:
    """What a call sequence did from a snapshot: each call's result message and the final
    state."""

    messages: list[str]
    final: Snapshot
    failed_calls: int


def replay(spec: WorldSpec, initial: Snapshot, calls: list[Call]) -> Replay:
    """Run `calls` on a fresh copy of the world at `initial`."""
    return replay_each(spec, initial, [calls])[0]


def replay_each(spec: WorldSpec, initial: Snapshot, sequences: list[list[Call]]) -> list[Replay]:
    """Run each call sequence from `initial` (one world, reset before each)."""
    with _world_at(spec, initial) as world:
        replays = []
        for index, calls in enumerate(sequences):
            if index:
                world.reset(initial)
            results = [world.call(name, arguments) for name, arguments in calls]
            failed = sum(not r.ok for r in results)
            replays.append(Replay([r.message() for r in results], world.snapshot(), failed))
        return replays


@contextmanager
def _world_at(spec: WorldSpec, initial: Snapshot) -> Iterator[World]:
    """A world of `spec` at `initial`: an idle one, reset, else a new one. Opening a DuckDB
    database and creating the tables is half a replay's cost, and a trainer scores the same
    few worlds over and over. Idle worlds are shared by the process's threads (one at a time
    each), at most `IDLE_WORLDS` of them: each holds a database and its threads."""
    with _IDLE_LOCK:
        world = next((w for w in _IDLE if w.spec.world_id == spec.world_id), None)
        if world is not None:
            _IDLE.remove(world)
    if world is None:
        world = World(spec, initial)
    else:
        world.reset(initial)
    try:
        yield world
    finally:
        with _IDLE_LOCK:
            _IDLE.append(world)
            retired = _IDLE.pop(0) if len(_IDLE) > IDLE_WORLDS else None
        if retired is not None:
            retired.close()


def state_diff(before: Snapshot, after: Snapshot) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per table, the rows only `before` has (`removed`) and only `after` has (`added`); a
    changed row is one of each."""
    diff = {}
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, []), after.get(table, [])
        removed = [row for row in old if row not in new]
        added = [row for row in new if row not in old]
        if removed or added:
            diff[table] = {"removed": removed, "added": added}
    return diff


def gold_calls(task: Task) -> list[Call]:
    """A tool-use task's gold call sequence, as replayed."""
    return [(call.name, dict(call.arguments)) for call in task.verifier.tool_calls]
