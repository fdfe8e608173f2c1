"""Replaying recorded tool calls and grading an attempt's calls against the expected ones.

A tool-replay task offers the tools a production trace used; a call that repeats a recorded
call (same tool, same key arguments) gets that call's recorded result, any other call
`NO_RESULT`. The attempt's reward is the share of expected calls it made in order, 0 for a net
cast for them (`call_checks`). This module is taskfoundry's one replay runtime and is
standalone: it imports only the standard library and `call_checks` beside it, so the export
copies it as it is into the verifiers v1 taskset package (`data/export/verifiers_package.py`), whose
tool server and reward use it without taskfoundry. `harnesses.tool_replay` and
`judges.tool_calls` build on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .call_checks import Call, canonical, spam

EXTRA_TURNS = 2  # turns beyond one per recorded call: a lookup too many, and the answer
NO_RESULT = (
    "No recorded result: production never made this call with these arguments, so it cannot"
    " be replayed. Call a tool with other arguments, or answer."
)


def same_value(expected: Any, actual: Any) -> bool:
    """Equal after `canonical`: numbers by value ("39.90" and 39.9), ids digit for digit
    ("02134" is not 2134), text with case and spacing ignored."""
    return canonical(expected) == canonical(actual)


def repeats(call: Call, name: str, key_arguments: dict[str, Any]) -> bool:
    """Whether `call` is a call of `name` with every one of `key_arguments`."""
    made, arguments = call
    if made != name or not isinstance(arguments, dict):
        return False
    return all(
        key in arguments and same_value(value, arguments[key])
        for key, value in key_arguments.items()
    )


def replayed(recorded: Sequence[dict[str, Any]], call: Call, used: set[int]) -> int | None:
    """The index of the recorded call (`{"call": {"name", "arguments"}, "key_arguments"}`)
    whose result `call` gets: among those it repeats, the one it matches on most arguments, one
    not yet replayed before one that was, the earliest on a tie; None when it repeats none.
    `used` collects the replayed indexes of this episode."""
    best: tuple[bool, int, int] | None = None
    arguments = call[1] if isinstance(call[1], dict) else {}
    for index, entry in enumerate(recorded):
        if not repeats(call, entry["call"]["name"], entry.get("key_arguments") or {}):
            continue
        agreeing = sum(
            key in arguments and same_value(value, arguments[key])
            for key, value in (entry["call"].get("arguments") or {}).items()
        )
        rank = (index not in used, agreeing, -index)
        if best is None or rank > best:
            best = rank
    if best is None:
        return None
    used.add(-best[2])
    return -best[2]


def replay(recorded: Sequence[dict[str, Any]], call: Call, used: set[int]) -> str:
    """The recorded result `call` gets (see `replayed`), or `NO_RESULT`."""
    index = replayed(recorded, call, used)
    return NO_RESULT if index is None else str(recorded[index]["result"])


def grade_calls(calls: list[Call], expected: list[Call]) -> tuple[float, str]:
    """The share of `expected` calls (name and key arguments) that `calls` made in order, and
    why: 0 for no expected calls, more than twice as many calls as expected, or a net of
    `call_checks.spam` (guessed arguments, a wildcard)."""
    if not expected:
        return 0.0, "the task expects no calls"
    if len(calls) > 2 * len(expected):
        return 0.0, f"{len(calls)} calls for {len(expected)} expected"
    refused = spam(calls, expected)
    if refused:
        return 0.0, refused
    matched, position = 0, 0
    for name, key_arguments in expected:
        found = next(
            (i for i in range(position, len(calls)) if repeats(calls[i], name, key_arguments)),
            None,
        )
        if found is None:
            break
        matched, position = matched + 1, found + 1
    missing = "" if matched == len(expected) else f"; missing {expected[matched][0]}"
    why = f"{matched}/{len(expected)} expected calls made in order{missing}"
    return matched / len(expected), why
