"""`world_state`: the attempt's calls replayed on the task's world must leave the gold state
(`judges.world_state`); the world family grades it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from data.export import Packaged, setup_of
from data.lake import WorldStateSpec
from judges import tool_calls, world_state
from judges.rewards import trainer_task
from judges.verifier_types.base import RewardRow, VerifierType


def _reward(row: RewardRow) -> float | None:
    """The completion's tool calls replayed on the row's `world` (None without one)."""
    world = row.columns.get("world")
    if not world:
        return None
    task = trainer_task(row.prompt, row.gold, row.spec, "world_tool_use", world=world)
    return world_state.grade(task, row.completion).reward


def _package_lacks(task: dict[str, Any], version: Path) -> str | None:
    return None if setup_of(task, "world") else "world_state_without_world"


TYPE = VerifierType(
    "world_state",
    WorldStateSpec,
    None,
    reward=_reward,
    is_gold=tool_calls.makes_expected_calls,
    packaged=Packaged("world", _package_lacks),
)
