"""World fidelity: how closely a world spec reproduces the tool results recorded in traces.

Each trace's calls are replayed in order against a fresh world at its seed state, and each
call's result is compared with the recorded one by shape, never by value:

- error or success: a recorded result is an error when it is a JSON object whose `error` entry
  is set (not null, false or empty), or text (not JSON, or a JSON string) that says "not found",
  "no such", "error" or "invalid" (`harnesses.observed_calls.recorded_error`); the world's
  result is an error when its call failed (a check, invalid arguments, a failing statement);
- two successes are compared by their JSON values: objects by their field names and the JSON
  type of each shared field (string, number, boolean, null, object, array: ints and floats are
  both number; a field that is null in the world's result and absent from the recording counts
  as absent); arrays by their first elements (two empty arrays match, an empty and a
  non-empty one do not); anything else by its type alone (so a `row` result that is null where
  an object was recorded differs).

A call scores 0 when the error status differs or the world lacks the tool, 1 when both failed,
and for two objects the Jaccard index of their field names times the share of shared fields of
the same type. The report's score is the mean over the calls (0 when there are none).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import duckdb

from harnesses.observed_calls import (
    Observation,
    ObservedCall,
    json_kind,
    recorded_error,
    recorded_value,
)
from harnesses.world import ToolResult, World, WorldSpec

MAX_ARGUMENT_CHARS = 40  # an argument's value in a mismatch line is cut to this
MAX_ERROR_CHARS = 80


@dataclass(frozen=True)
class FidelityReport:
    """The mean shape score over the replayed calls, how many there were, and what differed."""

    score: float
    calls: int
    mismatches: list[str]

    def to_json(self) -> str:
        """The report as a JSON object, for storage."""
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)


def fidelity(spec: WorldSpec, observation: Observation) -> FidelityReport:
    """Replay each of the observation's traces against a fresh world of `spec` and compare
    every call's result with the recorded one by shape."""
    outcomes = [outcome for calls in observation.sequences for outcome in _replay(spec, calls)]
    scores = [score for score, _ in outcomes]
    return FidelityReport(
        score=sum(scores) / len(scores) if scores else 0.0,
        calls=len(scores),
        mismatches=[line for _, line in outcomes if line],
    )


def _replay(spec: WorldSpec, calls: list[ObservedCall]) -> list[tuple[float, str]]:
    """Each call's score and mismatch line ("" when its shape matched), in order."""
    try:
        world = World(spec)
    except duckdb.Error as error:
        reason = f"the world does not start: {str(error).splitlines()[0]}"
        return [(0.0, f"{_call_text(call)}: {reason}") for call in calls]
    tools = {tool.name for tool in spec.tools}
    try:
        return [_replay_call(world, tools, call) for call in calls]
    finally:
        world.close()


def _replay_call(world: World, tools: set[str], call: ObservedCall) -> tuple[float, str]:
    if call.name not in tools:
        return 0.0, f"{_call_text(call)}: no such tool in the world"
    score, problems = _compare(world.call(call.name, call.arguments), call.result)
    return score, f"{_call_text(call)}: {'; '.join(problems)}" if problems else ""


def _compare(result: ToolResult, recorded: str) -> tuple[float, list[str]]:
    failed = recorded_error(recorded)
    if not result.ok and failed:
        return 1.0, []
    if not result.ok:
        return 0.0, [f"failed ({result.error[:MAX_ERROR_CHARS]}), recorded a success"]
    if failed:
        return 0.0, ["succeeded, recorded an error"]
    return _shape(result.content, recorded_value(recorded))


def _shape(actual: Any, recorded: Any) -> tuple[float, list[str]]:
    if isinstance(actual, dict) and isinstance(recorded, dict):
        return _fields(actual, recorded)
    if isinstance(actual, list) and isinstance(recorded, list):
        if actual and recorded:
            return _shape(actual[0], recorded[0])
        if actual or recorded:
            sizes = ("a non-empty", "an empty") if actual else ("an empty", "a non-empty")
            return 0.0, [f"result is {sizes[0]} array, recorded {sizes[1]} one"]
    if json_kind(actual) == json_kind(recorded):
        return 1.0, []
    return 0.0, [f"result is {json_kind(actual)}, recorded {json_kind(recorded)}"]


def _fields(actual: dict[str, Any], recorded: dict[str, Any]) -> tuple[float, list[str]]:
    """Field Jaccard × the share of shared fields of the same type, and what differs. A field
    the world returns as null and the recording lacks counts as absent: APIs often omit empty
    fields, and a world's table has a column for every field any call returned."""
    want = set(recorded)
    have = {f for f, value in actual.items() if value is not None or f in want}
    if not have | want:
        return 1.0, []
    shared = sorted(have & want)
    differ = [f for f in shared if json_kind(actual[f]) != json_kind(recorded[f])]
    score = len(shared) / len(have | want) * (1 - len(differ) / len(shared)) if shared else 0.0
    problems = []
    if want - have:
        problems.append(f"missing fields {', '.join(sorted(want - have))}")
    if have - want:
        problems.append(f"extra fields {', '.join(sorted(have - want))}")
    problems += [
        f"{f} is {json_kind(actual[f])}, recorded {json_kind(recorded[f])}" for f in differ
    ]
    return score, problems


def _call_text(call: ObservedCall) -> str:
    """`name(arg='value', ...)`, long values cut."""
    arguments = ", ".join(
        f"{name}={repr(value)[:MAX_ARGUMENT_CHARS]}" for name, value in call.arguments.items()
    )
    return f"{call.name}({arguments})"
