"""Tool calls observed in production traces, and how to read their recorded results.

A world built from traces (`generators.trace_worlds`) is drafted from these calls and replayed
against them (`judges.world_fidelity`): both read a recorded result the same way, as a JSON
value where it is one, an error or not, and typed by JSON kind.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from data.lake import ToolSpec

ERROR_TEXT = re.compile(r"\b(not found|no such|error|invalid)\b", re.IGNORECASE)


@dataclass(frozen=True)
class ObservedCall:
    """One answered tool call of a trace: the tool, its arguments and the recorded result."""

    name: str
    arguments: dict[str, Any]
    result: str
    trace_id: str


@dataclass(frozen=True)
class Observation:
    """Traces offering the same tools: the tools (by name) and each trace's answered calls in
    the order made. `key` hashes the sorted tool names."""

    key: str
    tools: list[ToolSpec]
    sequences: list[list[ObservedCall]]
    trace_ids: list[str]

    @property
    def calls(self) -> list[ObservedCall]:
        """Every observed call, trace after trace."""
        return [call for calls in self.sequences for call in calls]


def recorded_value(text: str) -> Any:
    """A recorded result as the JSON value it holds, else its text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def recorded_error(text: str) -> bool:
    """Whether a recorded result reports an error: a JSON object whose `error` entry is set
    (not null, false or empty), or text (not JSON, or a JSON string) that says "not found",
    "no such", "error" or "invalid"."""
    value = recorded_value(text)
    if isinstance(value, str):
        return ERROR_TEXT.search(value) is not None
    return isinstance(value, dict) and value.get("error") not in (None, False, "")


def json_kind(value: Any) -> str:
    """The JSON type of a value: string, number, boolean, null, object or array."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float | Decimal):
        return "number"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"  # text, and the dates and times a world writes as text
