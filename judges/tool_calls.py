"""The tool-call verifier: an attempt must make the calls production made, in order.

An attempt (what the tool-replay harness returns) is JSON: `{"calls": [{"name", "arguments"}],
"answer": ...}`. Each expected call must be matched by a later call of the attempt with the same
tool name and equal key arguments (`data.runtime.replay_runtime.same_value`: numbers by value, text
case- and space-insensitively); arguments the task leaves out (free text) are not compared. The
reward is the share of expected calls matched. Three ways to have the expected calls among many
score 0: more than twice as many calls as expected, and the nets of `data.runtime.call_checks.spam`
(an argument swept through more values than the expected calls give it, a wildcard where they
give a value). The world verifier refuses the same (`data.runtime.world_grading.grade_calls`).
"""

from __future__ import annotations

import json
from typing import Any

from data.lake import Task, ToolCall, ToolCallsSpec
from data.runtime.replay_runtime import grade_calls
from harnesses.world_replay import as_calls
from judges.score import Score


def parse_calls(completion: str) -> list[ToolCall] | None:
    """The calls of a tool-replay attempt, or None if it is not one."""
    try:
        value = json.loads(completion)
        return [
            ToolCall(name=str(c["name"]), arguments=dict(c.get("arguments") or {}))
            for c in value["calls"]
        ]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def expected_calls(task: Task) -> list[ToolCall]:
    """The gold call sequence: a tool-replay task's answer holds it with every argument; a
    world task's verifier holds it."""
    recorded = parse_calls(task.answer)
    return recorded if recorded is not None else list(task.verifier.tool_calls)


def makes_expected_calls(task: Task, attempt: str) -> bool:
    """Whether `attempt` makes exactly the gold calls, in order (the gold itself)."""
    made = parse_calls(attempt)
    return made is not None and as_calls(made) == as_calls(expected_calls(task))


def grade(spec: ToolCallsSpec, completion: str) -> Score:
    """The share of expected calls the attempt made, in order (see the module docstring;
    `data.runtime.replay_runtime.grade_calls`, as the exported verifiers package grades)."""
    calls = parse_calls(completion)
    if calls is None:
        return Score(0.0, "not a tool-replay attempt")
    reward, why = grade_calls(as_calls(calls), as_calls(spec.tool_calls))
    return Score(reward, why, exact=reward == 1.0)


def perturbed(calls: list[ToolCall]) -> list[tuple[str, list[ToolCall]]]:
    """Near misses the verifier must reject: the last call left out, and each call with its
    first key argument changed."""
    found = [("last_call_missing", calls[:-1])]
    for index, call in enumerate(calls):
        if call.arguments:
            key = next(iter(call.arguments))
            changed = call.model_copy(
                update={"arguments": {**call.arguments, key: _other(call.arguments[key])}}
            )
            found.append(
                (f"{call.name}.{key}_changed", [*calls[:index], changed, *calls[index + 1 :]])
            )
    return found


def _other(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    return f"{value}-X"
