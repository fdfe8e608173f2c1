"""The tool-call verifier: an attempt must make the calls production made, in order.

An attempt (what the tool-replay harness returns) is JSON: `{"calls": [{"name", "arguments"}],
"answer": ...}`. Each expected call must be matched by a later call of the attempt with the same
tool name and equal key arguments (`harnesses.tool_replay.same_value`: numbers by value, text
case- and space-insensitively); arguments the task leaves out (free text) are not compared. The
reward is the share of expected calls matched. Three ways to have the expected calls among many
score 0 (`spam`): more than twice as many calls as expected, an argument swept through more
values than the expected calls give it ("guessed"), and a wildcard where the expected calls
give a value (`*`, `%`, `.*`, an empty string, null, `Sm%`). The world verifier
(`judges.world_state`) refuses the same.
"""

from __future__ import annotations

import json
import re
from typing import Any

from data.records import Task, ToolCall, ToolCallsSpec
from harnesses.tool_replay import attempt_text, canonical, repeats
from harnesses.world_replay import Call
from judges.score import Score

# a value that stands for any value: nothing, only pattern characters, or a pattern's ends
_WILDCARD = re.compile(r"[\s*%.?_^$]*|[*%].*|.*[*%]", re.DOTALL)
_PERCENTAGE = re.compile(r"[-+]?\d[\d,.]*\s*%")


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


def grade(spec: ToolCallsSpec, completion: str) -> Score:
    """The share of expected calls the attempt made, in order (see the module docstring)."""
    calls = parse_calls(completion)
    if calls is None:
        return Score(0.0, "not a tool-replay attempt")
    expected = spec.tool_calls
    if not expected:
        return Score(0.0, "the task expects no calls")
    if len(calls) > 2 * len(expected):
        return Score(0.0, f"{len(calls)} calls for {len(expected)} expected")
    refused = spam(as_calls(calls), as_calls(expected))
    if refused:
        return Score(0.0, refused)
    matched, position = 0, 0
    for want in expected:
        found = next(
            (
                i
                for i in range(position, len(calls))
                if repeats(calls[i], want.name, want.arguments)
            ),
            None,
        )
        if found is None:
            break
        matched, position = matched + 1, found + 1
    missing = "" if matched == len(expected) else f"; missing {expected[matched].name}"
    why = f"{matched}/{len(expected)} expected calls made in order{missing}"
    return Score(matched / len(expected), why, exact=matched == len(expected))


def as_calls(calls: list[ToolCall]) -> list[Call]:
    return [(call.name, dict(call.arguments)) for call in calls]


def is_wildcard(value: Any) -> bool:
    """Whether an argument value stands for any value rather than naming one."""
    if value is None:
        return True
    if isinstance(value, list | tuple):
        return not value or any(is_wildcard(v) for v in value)
    if not isinstance(value, str):
        return False
    text = value.strip()
    return bool(_WILDCARD.fullmatch(text)) and not _PERCENTAGE.fullmatch(text)


def spam(calls: list[Call], gold: list[Call]) -> str:
    """Why `calls` cast a net for the `gold` calls rather than making them, or "": a wildcard
    where a gold call of the tool gives the argument a value (not one of the gold values), or
    an argument of a gold call's tool given more distinct values than the gold calls give it."""
    wanted: dict[tuple[str, str], set[str]] = {}
    for name, arguments in gold:
        for key, value in arguments.items():
            wanted.setdefault((name, key), set()).add(canonical(value))
    tried: dict[tuple[str, str], set[str]] = {}
    for name, arguments in calls:
        for key, value in arguments.items() if isinstance(arguments, dict) else ():
            if (name, key) not in wanted:
                continue
            if is_wildcard(value) and canonical(value) not in wanted[name, key]:
                return f"wildcard argument: {name}.{key}={json.dumps(value)}"[:200]
            tried.setdefault((name, key), set()).add(canonical(value))
    for (name, key), values in tried.items():
        if len(values) > len(wanted[name, key]):
            return (
                f"guessed arguments: {name}.{key} given {len(values)} values,"
                f" the task {len(wanted[name, key])}"
            )
    return ""


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


def self_check(task: Task) -> str | None:
    """None if the verifier accepts the gold calls and rejects the near misses; otherwise which
    check failed."""
    spec = task.verifier
    if grade(spec, task.answer).reward < 1.0:
        return "gold calls rejected"
    for name, calls in perturbed(list(spec.tool_calls)):
        if grade(spec, attempt_text(calls)).reward >= 1.0:
            return f"{name} perturbation accepted"
    return None


def _other(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    return f"{value}-X"
