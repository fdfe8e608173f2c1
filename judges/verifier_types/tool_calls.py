"""`tool_calls`: the attempt must make the expected calls in order (`judges.tool_calls`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from data.export import Packaged, setup_of
from data.lake import Task, ToolCallsSpec
from data.llm import LLMClient
from harnesses.tool_replay import attempt_text
from judges import tool_calls
from judges.rewards import replay_attempt
from judges.score import Score
from judges.verifier_types.base import RewardRow, VerifierType


async def _grade(task: Task, completion: str, llm: LLMClient) -> Score:
    return tool_calls.grade(task.verifier, completion)


def _negatives(task: Task, passage: str) -> list[tuple[str, str]]:
    """Near misses: the last call left out, each call with its first key argument changed."""
    near = tool_calls.perturbed(list(task.verifier.tool_calls))
    return [(f"{name} perturbation accepted", attempt_text(calls)) for name, calls in near]


def _reward(row: RewardRow) -> float:
    """The share of expected calls made in order, from an episode's calls or the attempt JSON."""
    return tool_calls.grade(row.spec, replay_attempt(row.completion)).reward


def _package_lacks(task: dict[str, Any], version: Path) -> str | None:
    """A replay needs the recorded tools to answer from, and calls to grade."""
    if not setup_of(task, "environment"):
        return "tool_calls_without_environment"
    return None if json.loads(task["verifier"]).get("tool_calls") else "tool_calls_without_calls"


TYPE = VerifierType(
    "tool_calls",
    ToolCallsSpec,
    _grade,
    reward=_reward,
    negatives=_negatives,
    gold_rejected="gold calls rejected",
    is_gold=tool_calls.makes_expected_calls,
    must_refuse=("forged calls",),
    packaged=Packaged("replay", _package_lacks),
)
