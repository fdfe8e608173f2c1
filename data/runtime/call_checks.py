"""What an attempt's tool calls must not do to be graded at all: cast a net for the expected
calls instead of making them. Shared by the tool-call verifier (`judges.tool_calls`), the world
verifier (`data.runtime.world_grading.grade_calls`) and, copied as it is, the verifiers v1 taskset
package, so it imports only the standard library.

Three nets score 0: more calls than twice the expected ones plus `EXTRA_CALLS`; an argument of
an expected call's tool swept through more values than the expected calls give it ("guessed");
a wildcard where the expected calls give a value (`*`, `%`, `.*`, an empty string, null, `Sm%`).
Values are compared after `canonical`: numbers by value ("39.90" and 39.9), ids digit for digit
("02134" is not 2134), text with case and spacing ignored.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

Call = tuple[str, dict[str, Any]]  # a tool's name and its arguments
EXTRA_CALLS = 2  # calls beyond twice the expected ones: a lookup they skip, a retry
NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?")  # "0123" is an id, not a number
THOUSANDS = re.compile(r"-?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")  # 1,000.50
# a value that stands for any value: nothing, only pattern characters, or a pattern's ends
_WILDCARD = re.compile(r"[\s*%.?_^$]*|[*%].*|.*[*%]", re.DOTALL)
_PERCENTAGE = re.compile(r"[-+]?\d[\d,.]*\s*%")


def canonical(value: Any) -> str:
    """A value as compared: numbers in plain decimal form without trailing zeros, other
    text lower-cased with spacing collapsed."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _plain(Decimal(repr(value)))
    text = " ".join(str(value).lower().split())
    if THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    if NUMBER.fullmatch(text):
        return _plain(Decimal(text))
    return text


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


def too_many(calls: list[Call], gold: list[Call]) -> str:
    """Why `calls` are too many for the `gold` calls, or ""."""
    if len(calls) > 2 * len(gold) + EXTRA_CALLS:
        return f"{len(calls)} calls for {len(gold)} expected calls"
    return ""


def _plain(number: Decimal) -> str:
    return format(number.normalize(), "f")
