"""Replaying tool calls on a world: run a call sequence from a snapshot and keep each call's
result message and the final state (`data.runtime.world_runtime`), and a stored task's gold calls.

The world verifier replays an attempt's calls, a generator replays its gold calls, and the
self-check (`harnesses.world_check`) replays both and their plausible wrong variants. Worlds
are kept open between replays (`IDLE_WORLDS` of them), so scoring the same few worlds over and
over does not pay for opening a database each time.
"""

from __future__ import annotations

from collections.abc import Iterable

from data.lake import Task, ToolCall
from data.runtime.world_runtime import IDLE_WORLDS, Call, Replay, replay, replay_each, state_diff

__all__ = [
    "IDLE_WORLDS",
    "Call",
    "Replay",
    "as_calls",
    "gold_calls",
    "replay",
    "replay_each",
    "state_diff",
]


def as_calls(calls: Iterable[ToolCall]) -> list[Call]:
    """Recorded tool calls as replayed and compared: (name, arguments) pairs."""
    return [(call.name, dict(call.arguments)) for call in calls]


def gold_calls(task: Task) -> list[Call]:
    """A tool-use task's gold call sequence, as replayed."""
    return as_calls(task.verifier.tool_calls)
