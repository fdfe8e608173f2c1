"""Names, values and SQL pieces of a world drafted from traces: which tools read and which
arguments are keys, the entity a key names, the column type a recorded value fits, a tool's
inferred argument schema, and SQL literals and quoted names."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Literal

from data.lake import ToolSpec
from harnesses.observed_calls import (
    ObservedCall,
    json_kind,
)
from harnesses.world import IDENTIFIER

READ_PREFIXES = ("get", "lookup", "find", "search", "list", "track", "check", "show")


KEY_SUFFIXES = ("_id", "_number", "_code")


POSITION = "_position"  # the key column of the tables a draft names after a tool


# a column's kind: a world column type, or "json" (a nested value kept as JSON text)
Kind = Literal["text", "integer", "number", "boolean", "json"]


KIND_ORDER: tuple[Kind, ...] = ("text", "number", "integer", "boolean", "json")  # tie-breaks


STRUCTURE_TYPES = {"text": "VARCHAR", "integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN"}


def inferred_parameters(calls: list[ObservedCall]) -> dict[str, Any]:
    """A JSON schema for the arguments given: each typed as first seen (a whole number as
    integer), required when every call gave it."""
    kinds: dict[str, str] = {}
    for call in calls:
        for name, value in call.arguments.items():
            whole = isinstance(value, int) and not isinstance(value, bool)
            kinds.setdefault(name, "integer" if whole else json_kind(value))
    return {
        "type": "object",
        "properties": {
            name: {} if kind == "null" else {"type": kind} for name, kind in sorted(kinds.items())
        },
        "required": sorted(n for n in kinds if all(n in call.arguments for call in calls)),
    }


def is_read(tool: str) -> bool:
    """A name that starts with a read verb, as a word (`get_order`, `getOrder`, `list`)."""
    for prefix in READ_PREFIXES:
        rest = tool[len(prefix) :]
        if tool.lower().startswith(prefix) and (not rest or rest[0] == "_" or rest[0].isupper()):
            return True
    return False


def is_key(name: str) -> bool:
    return name == "id" or any(name.endswith(s) and len(name) > len(s) for s in KEY_SUFFIXES)


def stem_of(key: str, tool: str) -> str:
    """The entity a key names: `order_id` → order; a bare `id`, the tool name's last word; a
    number or code, itself (`order_number` → order_number, apart from `order_id`)."""
    if key == "id":
        return tool.lower().rsplit("_", 1)[-1]
    return key.removesuffix("_id")


def entity_of(key: str, tool: str) -> tuple[str, str]:
    """The table a key names and its key column: `order_id` → orders.order_id; a bare `id` →
    the `<entity>_id` of the entity the tool name's last word names (`get_user` → users.user_id)."""
    stem = stem_of(key, tool)
    column = f"{stem}_id" if key == "id" else key
    if stem.endswith(("s", "x", "sh", "ch")):
        return stem + "es", column
    if stem.endswith("y") and stem[-2:-1] not in ("a", "e", "i", "o", "u"):
        return stem[:-1] + "ies", column
    return stem + "s", column


def not_found(key: str, tool: str) -> str:
    return f"{stem_of(key, tool).replace('_', ' ')} {{{key}}} not found"


def argument_names(tool: ToolSpec, calls: list[ObservedCall]) -> list[str]:
    """The tool's argument names (the offered ones in order, then any other given), those that
    are identifiers."""
    offered = tool.parameters.get("properties")
    names = list(offered) if isinstance(offered, dict) else []
    names += sorted({n for call in calls for n in call.arguments} - set(names))
    return [n for n in names if re.match(IDENTIFIER, n)]


def field_names(results: list[Any]) -> list[str]:
    """The field names of the object results, in the order first seen, identifiers only."""
    fields: dict[str, None] = {}
    for result in results:
        if isinstance(result, dict):
            fields.update((f, None) for f in result if re.match(IDENTIFIER, f))
    return list(fields)


def is_scalar(value: Any) -> bool:
    return not isinstance(value, list | dict)


def value_kind(value: Any) -> Kind:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "json" if isinstance(value, list | dict) else "text"


def common_kind(values: list[Any]) -> Kind:
    """The kind most non-null values have (integers and numbers together make number)."""
    counts = Counter(value_kind(v) for v in values if v is not None)
    if "integer" in counts and "number" in counts:
        counts["number"] += counts.pop("integer")
    if not counts:
        return "text"
    return max(KIND_ORDER, key=lambda k: (counts[k], -KIND_ORDER.index(k)))


def stored_value(value: Any, kind: Kind) -> Any:
    """The value as stored in a column of `kind`: nested values as JSON text; None when it does
    not fit."""
    if value is None:
        return None
    if kind == "json":
        return json.dumps(value, ensure_ascii=False) if not is_scalar(value) else None
    have = value_kind(value)
    return value if have == kind or (kind == "number" and have == "integer") else None


def json_structure(value: Any) -> Any:
    """The `from_json` structure of a value (of the first nested one, given a column's values);
    an empty object reads back as JSON text."""
    if isinstance(value, dict) and value:
        return {k: json_structure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_structure(value[0])] if value else ["JSON"]
    if value is None:
        return "NULL"
    return STRUCTURE_TYPES.get(value_kind(value), "JSON")


def select_item(field: str, column: str, kinds: dict[str, Kind], structures: dict[str, Any]) -> str:
    """The SELECT item giving a result field from its column (nested values parsed back)."""
    if kinds[column] == "json":
        shape = json.dumps(structures[column])
        return f"from_json({quoted(column)}, {sql_literal(shape)}) AS {quoted(field)}"
    return quoted(column) if column == field else f"{quoted(column)} AS {quoted(field)}"


def sql_constant(value: Any) -> str:
    """A SQL expression for a JSON value."""
    if is_scalar(value):
        return sql_literal(value)
    text, shape = json.dumps(value, ensure_ascii=False), json.dumps(json_structure(value))
    return f"from_json({sql_literal(text)}, {sql_literal(shape)})"


def sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value!r}::DOUBLE"
    return "'" + str(value).replace("'", "''") + "'"


def quoted(name: str) -> str:
    return f'"{name}"'
