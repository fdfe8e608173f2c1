"""Worlds from production traces: the tools a group of traces called, as a simulated world.

`observe` groups ingested (scrubbed) traces by the tools they offer and keeps each trace's
answered calls in order; `draft_spec` builds a first world spec from those calls alone, with no
model; `write_spec` asks the generator model for a better one, shown the tools, the calls with
their recorded results, the draft and, on a refinement round, what replaying the previous spec
got wrong. A spec is judged by replaying the calls against it (`judges.world_fidelity`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema
from pydantic import ValidationError

from data.llm import LLMClient, LLMError
from data.prompts import chat_messages, load_prompt
from data.records import ToolSpec, Trace, content_id, seed_for
from generators.checks import CheckFailure
from generators.trace_tasks import recorded_calls
from harnesses.observed_calls import (
    Observation,
    ObservedCall,
    json_kind,
    recorded_error,
    recorded_value,
)
from harnesses.world import IDENTIFIER, WorldSpec

GENERATOR = "trace_world"
VERSION = "1"
WORLD_PROMPT = load_prompt(__file__, "trace_world")
SYSTEM_PROMPT = load_prompt(__file__, "trace_world_system")
READ_PREFIXES = ("get", "lookup", "find", "search", "list", "track", "check", "show")
KEY_SUFFIXES = ("_id", "_number", "_code")
POSITION = "_position"  # the key column of the tables a draft names after a tool
MAX_EXAMPLE_CALLS = 40  # recorded calls shown to the generator model
MAX_RESULT_CHARS = 400  # a recorded result shown to it is cut to this
MAX_FEEDBACK_CHARS = 4000

# a column's kind: a world column type, or "json" (a nested value kept as JSON text)
Kind = Literal["text", "integer", "number", "boolean", "json"]
KIND_ORDER: tuple[Kind, ...] = ("text", "number", "integer", "boolean", "json")  # tie-breaks
STRUCTURE_TYPES = {"text": "VARCHAR", "integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN"}


def observe(traces: list[Trace]) -> list[Observation]:
    """The traces with at least one answered tool call, grouped by the tools they offer (and
    any they called without offering them). Calls are paired with the tool messages answering
    them by call id (by position where a format records no ids, as `recorded_calls` does); a
    call without a result is left out. Largest groups first, then by key."""
    groups: dict[tuple[str, ...], list[tuple[Trace, list[ObservedCall]]]] = {}
    unique = {trace.trace_id: trace for trace in traces}
    for trace_id in sorted(unique):
        trace = unique[trace_id]
        calls = [
            ObservedCall(r.call.name, dict(r.call.arguments), r.result, trace_id)
            for r in recorded_calls(trace.messages)
            if r.result.strip()
        ]
        if calls:
            names = {tool.name for tool in trace.tools} | {call.name for call in calls}
            groups.setdefault(tuple(sorted(names)), []).append((trace, calls))
    observations = [_observation(names, members) for names, members in groups.items()]
    return sorted(observations, key=lambda o: (-len(o.trace_ids), o.key))


def _observation(
    names: tuple[str, ...], members: list[tuple[Trace, list[ObservedCall]]]
) -> Observation:
    offered: dict[str, ToolSpec] = {}
    for trace, _ in members:
        for tool in trace.tools:
            offered.setdefault(tool.name, tool)
    sequences = [calls for _, calls in members]
    called = [call for calls in sequences for call in calls]
    tools = [
        offered.get(name)
        or ToolSpec(
            name=name, parameters=_inferred_parameters([c for c in called if c.name == name])
        )
        for name in names
    ]
    return Observation(
        key=content_id("trace_world_tools", list(names)),
        tools=tools,
        sequences=sequences,
        trace_ids=[trace.trace_id for trace, _ in members],
    )


def _inferred_parameters(calls: list[ObservedCall]) -> dict[str, Any]:
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


# --- the mechanical draft ------------------------------------------------------------------


@dataclass
class _Tables:
    """The draft's tables as they are worked out: key columns, the values seen per column (for
    typing) and the seed rows, merged by key (a column's first non-null value wins)."""

    keys: dict[str, list[str]] = field(default_factory=dict)
    values: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    rows: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def add(self, table: str, key: list[str], columns: Iterable[str] = ()) -> None:
        self.keys.setdefault(table, key)
        seen = self.values.setdefault(table, {})
        for column in [*key, *columns]:
            seen.setdefault(column, [])

    def note(self, table: str, column: str, value: Any) -> None:
        self.values[table].setdefault(column, []).append(value)

    def seed(self, table: str, row: dict[str, Any]) -> None:
        for column, value in row.items():
            self.note(table, column, value)
        key = json.dumps([row.get(k) for k in self.keys[table]], sort_keys=True)
        kept = self.rows.setdefault(table, {}).setdefault(key, {})
        for column, value in row.items():
            if kept.get(column) is None:
                kept[column] = value

    def kinds(self) -> dict[str, dict[str, Kind]]:
        return {
            table: {
                column: "integer" if column == POSITION else _kind(values)
                for column, values in columns.items()
            }
            for table, columns in self.values.items()
        }

    def structures(self, kinds: dict[str, dict[str, Kind]]) -> dict[str, dict[str, Any]]:
        """The `from_json` structure of each nested column: its first nested value's."""
        return {
            table: {
                column: _structure(next(v for v in values if not _scalar(v)))
                for column, values in columns.items()
                if kinds[table][column] == "json"
            }
            for table, columns in self.values.items()
        }


@dataclass(frozen=True)
class _Plan:
    """What one tool of the draft does, before its SQL is written."""

    tool: ToolSpec
    kind: Literal["read", "memo", "update", "create"]
    table: str
    keys: list[str]  # key arguments whose records must exist (the first: the tool's entity)
    error: str  # what the check of the first key's record says when it fails
    fields: list[str]  # the result's fields
    match: dict[str, str] = field(default_factory=dict)  # column = argument, to find the rows
    rows: bool = False  # read, memo: the result is a list
    written: list[str] = field(default_factory=list)  # update, create: the arguments stored
    constants: dict[str, Any] = field(default_factory=dict)  # fields given no value: as first seen
    generated: str = ""  # create: the key column it fills
    aliases: dict[str, str] = field(default_factory=dict)  # field: the column holding it
    prefix: str = ""  # create: the generated text key's prefix


def draft_spec(observation: Observation, name: str) -> WorldSpec:
    """A first world for the observation, worked out from the calls alone.

    Heuristics:
    - an argument named `id` or ending in `_id`, `_number` or `_code` is a key: it names an
      entity table (`order_id` → `orders` keyed by `order_id`, `tracking_number` →
      `tracking_numbers`; a bare `id` is the `<entity>_id` of the tool name's last word:
      `get_user(id)` → `users.user_id`), and every call checks that its key arguments' records
      exist, failing with the error the traces recorded for the tool (or "<entity> {key} not
      found");
    - a tool whose name starts with get/lookup/find/search/list/track/check/show reads: with a
      key argument and object results, `SELECT <observed result fields> FROM <entity> WHERE
      key = $key` (returns "row"); otherwise (no key argument, or list results) from a table of
      its own, `<tool>_results`, holding each observed result by the arguments every call gave;
    - any other tool writes: when its results carry a key field it was not given (`refund_id`)
      it INSERTs a record with a generated key (the observed prefix and the next number) into
      that key's table and returns it; else with a key argument it UPDATEs its entity with its
      other arguments; else it INSERTs its call into a table of its own, `<tool>_log`; result
      fields that are neither arguments nor stored are constants, the first value observed;
    - columns are the key and scalar arguments and the results' fields, typed by the JSON type
      most values had (int and float together: number); nested values are kept as JSON text and
      read back with `from_json`; a value of another type is left NULL;
    - seed rows: every record a successful call named, with what the read calls returned for it
      (the first value seen of each field); what failed in the traces is not seeded.
    """
    calls: dict[str, list[ObservedCall]] = {}
    for call in observation.calls:
        calls.setdefault(call.name, []).append(call)
    tables = _Tables()
    plans = [
        _plan(tool, calls.get(tool.name, []), tables)
        for tool in observation.tools
        if re.match(IDENTIFIER, tool.name)
    ]
    if not plans:
        raise CheckFailure("no_usable_tool")
    kinds = tables.kinds()
    structures = tables.structures(kinds)
    return WorldSpec.model_validate(
        {
            "name": name,
            "description": (
                f"the back office behind the tools {', '.join(sorted(calls))} (a world drafted"
                f" from {len(observation.trace_ids)} production traces)."
            ),
            "tables": {
                table: {
                    "columns": {c: "text" if k == "json" else k for c, k in columns.items()},
                    "key": tables.keys[table],
                }
                for table, columns in kinds.items()
            },
            "seed": _seed(tables, kinds),
            "tools": [
                _tool(plan, calls.get(plan.tool.name, []), kinds, structures) for plan in plans
            ],
        }
    )


def _plan(tool: ToolSpec, calls: list[ObservedCall], tables: _Tables) -> _Plan:
    """The tool's plan; its tables, the values seen and the seed rows go into `tables`."""
    succeeded = [call for call in calls if not recorded_error(call.result)]
    results = [recorded_value(call.result) for call in succeeded]
    names = _argument_names(tool, calls)
    scalars = [n for n in names if all(_scalar(c.arguments.get(n)) for c in calls)]
    keys = sorted(
        (n for n in scalars if _is_key(n)), key=lambda n: _stem(n, tool.name) not in tool.name
    )
    for key in keys:
        table, column = _entity(key, tool.name)
        tables.add(table, [column])
        for call in succeeded:
            if call.arguments.get(key) is not None:
                tables.seed(table, {column: call.arguments[key]})
    error = _error_template(calls, keys[0], tool.name) if keys else ""
    if _is_read(tool.name):
        return _read_plan(tool, keys, scalars, succeeded, results, tables, error)
    return _write_plan(tool, keys, scalars, succeeded, results, tables, error)


def _read_plan(
    tool: ToolSpec,
    keys: list[str],
    scalars: list[str],
    succeeded: list[ObservedCall],
    results: list[Any],
    tables: _Tables,
    error: str,
) -> _Plan:
    rows = sum(isinstance(r, list) for r in results) * 2 > len(results)
    if keys and not rows:
        (table, column), fields = _entity(keys[0], tool.name), _fields(results)
        aliases = {keys[0]: column} if keys[0] != column else {}  # a bare `id` in the result
        tables.add(table, [column], [f for f in fields if f not in aliases])
        for call, result in zip(succeeded, results, strict=True):
            if isinstance(result, dict) and call.arguments.get(keys[0]) is not None:
                found = {f: v for f, v in result.items() if f in fields and f not in aliases}
                tables.seed(table, {**found, column: call.arguments[keys[0]]})
        match = {column: keys[0]}
        return _Plan(tool, "read", table, keys, error, fields, match=match, aliases=aliases)
    table = f"{tool.name}_results"
    match = {n: n for n in scalars if succeeded and all(n in c.arguments for c in succeeded)}
    items = [r if isinstance(r, list) else [r] for r in results]
    fields = _fields([i for found in items for i in found]) or ["value"]
    tables.add(table, [*match, POSITION], fields)
    for call, found in zip(succeeded, items, strict=True):
        for position, item in enumerate(found):
            values = item if isinstance(item, dict) else {"value": item}
            given = {n: call.arguments[n] for n in match}
            row = {**{f: v for f, v in values.items() if f in fields}, **given}
            tables.seed(table, {**row, POSITION: position})
    return _Plan(tool, "memo", table, keys, error, fields, match=match, rows=rows)


def _write_plan(
    tool: ToolSpec,
    keys: list[str],
    scalars: list[str],
    succeeded: list[ObservedCall],
    results: list[Any],
    tables: _Tables,
    error: str,
) -> _Plan:
    objects = [r for r in results if isinstance(r, dict)]
    fields = _fields(objects)
    first = {f: next((o[f] for o in objects if o.get(f) is not None), None) for f in fields}
    generated = next(
        (
            f
            for f in fields
            if _is_key(f) and f not in scalars and json_kind(first[f]) in ("string", "number")
        ),
        "",
    )
    constants = {f: first[f] for f in fields if f not in scalars and f != generated}
    if keys and not generated:
        (table, column), written = _entity(keys[0], tool.name), [n for n in scalars if n != keys[0]]
        tables.add(table, [column], written)
        for call in succeeded:
            for name in written:
                tables.note(table, name, call.arguments.get(name))
        return _Plan(
            tool,
            "update",
            table,
            keys,
            error,
            fields,
            {column: keys[0]},
            written=written,
            constants=constants,
        )
    table, column = _entity(generated, tool.name) if generated else (f"{tool.name}_log", POSITION)
    aliases = {generated: column} if generated and generated != column else {}
    tables.add(table, [column], scalars)
    for call in succeeded:
        for name in scalars:
            tables.note(table, name, call.arguments.get(name))
    for obj in objects:
        for name in fields:
            tables.note(table, aliases.get(name, name), obj.get(name))
    prefix = (
        re.sub(r"[0-9]+$", "", first[generated]) if isinstance(first.get(generated), str) else ""
    )
    return _Plan(
        tool,
        "create",
        table,
        keys,
        error,
        fields,
        written=scalars,
        constants=constants,
        generated=column,
        prefix=prefix,
        aliases=aliases,
    )


def _tool(
    plan: _Plan,
    calls: list[ObservedCall],
    kinds: dict[str, dict[str, Kind]],
    structures: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """The tool definition of a plan, its SQL written."""
    effects: list[str] = []
    if plan.kind == "update":
        result = _update(plan, effects)
    else:
        columns = ", ".join(
            _column(f, plan.aliases.get(f, f), kinds[plan.table], structures[plan.table])
            for f in plan.fields
        )
        result = f"SELECT {columns or '*'} FROM {_quoted(plan.table)}"
        if plan.kind == "create":
            effects.append(_insert(plan, kinds[plan.table]))
            result = f"{result} ORDER BY {_newest(plan, kinds[plan.table])} LIMIT 1"
        else:
            where = _where(plan)
            result += f" WHERE {where}" if where else ""
            result += f' ORDER BY "{POSITION}"' if plan.kind == "memo" else ""
    shape = "rows" if plan.rows else "row"
    no_result = plan.kind in ("update", "create") and not plan.fields
    return {
        "name": plan.tool.name,
        "description": plan.tool.description or f"{plan.tool.name}, as seen in traces.",
        "parameters": _parameters(plan.tool, calls),
        "checks": _checks(plan),
        "effects": effects,
        "result": None if no_result else result,
        "returns": "none" if no_result else shape,
    }


def _where(plan: _Plan) -> str:
    return " AND ".join(f"{_quoted(c)} = ${a}" for c, a in plan.match.items())


def _update(plan: _Plan, effects: list[str]) -> str:
    """UPDATE the entity with the arguments written (into `effects`); the result query gives
    each field the argument of its name, else its constant."""
    if plan.written:
        assignments = ", ".join(f"{_quoted(n)} = ${n}" for n in plan.written)
        effects.append(f"UPDATE {_quoted(plan.table)} SET {assignments} WHERE {_where(plan)}")
    values = [
        f"{_constant(plan.constants[f]) if f in plan.constants else '$' + f} AS {_quoted(f)}"
        for f in plan.fields
    ]
    return f"SELECT {', '.join(values)}"


def _checks(plan: _Plan) -> list[dict[str, str]]:
    """That the record each key argument names exists; the entity's error as recorded."""
    return [
        {
            "sql": "SELECT 1 FROM {} WHERE {} = ${}".format(
                *map(_quoted, _entity(key, plan.tool.name)), key
            ),
            "error": plan.error if i == 0 else _not_found(key, plan.tool.name),
        }
        for i, key in enumerate(plan.keys)
    ]


def _insert(plan: _Plan, kinds: dict[str, Kind]) -> str:
    """INSERT the call's record with the next key: the prefix and one more than the largest
    number a key ends in (text keys), or one more than the largest key."""
    key = _quoted(plan.generated)
    if kinds[plan.generated] == "text":
        number = f"TRY_CAST(regexp_extract({key}, '[0-9]+$') AS BIGINT)"
        following = f"{_literal(plan.prefix)} || (coalesce(max({number}), 0) + 1)"
    else:
        following = f"coalesce(max({key}), 0) + 1"
    values = {
        plan.generated: following,
        **{n: f"${n}" for n in plan.written},
        **{f: _literal(_fit(v, kinds[f])) for f, v in plan.constants.items()},
    }
    columns = ", ".join(_quoted(c) for c in values)
    return (
        f"INSERT INTO {_quoted(plan.table)} ({columns})"
        f" SELECT {', '.join(values.values())} FROM {_quoted(plan.table)}"
    )


def _newest(plan: _Plan, kinds: dict[str, Kind]) -> str:
    """The order that puts the record just inserted first: its key is the largest."""
    key = _quoted(plan.generated)
    if kinds[plan.generated] == "text":
        return f"TRY_CAST(regexp_extract({key}, '[0-9]+$') AS BIGINT) DESC NULLS LAST"
    return f"{key} DESC"


def _seed(tables: _Tables, kinds: dict[str, dict[str, Kind]]) -> dict[str, list[dict[str, Any]]]:
    """The seed rows with values fitted to their columns; rows without a whole key left out."""
    seed: dict[str, list[dict[str, Any]]] = {}
    for table, rows in tables.rows.items():
        fitted = [{c: _fit(v, kinds[table][c]) for c, v in row.items()} for row in rows.values()]
        kept = [
            {c: v for c, v in row.items() if v is not None}
            for row in fitted
            if all(row.get(k) is not None for k in tables.keys[table])
        ]
        if kept:
            seed[table] = kept
    return seed


def _parameters(tool: ToolSpec, calls: list[ObservedCall]) -> dict[str, Any]:
    """The offered parameters where they are a valid object schema, else inferred; each
    parameter that is not a key gets the plain values the calls gave it as its JSON-schema
    `examples`, so goals can be drawn for it (a refund's amount and reason, a new address)."""
    try:
        jsonschema.Draft202012Validator.check_schema(tool.parameters)
        valid = tool.parameters.get("type") == "object"
    except jsonschema.SchemaError:
        valid = False
    parameters = dict(tool.parameters) if valid else _inferred_parameters(calls)
    properties = dict(parameters.get("properties") or {})
    for name, schema in properties.items():
        seen = [
            c.arguments[name]
            for c in calls
            if c.arguments.get(name) is not None and _scalar(c.arguments[name])
        ]
        if not _is_key(name) and seen:
            properties[name] = {**schema, "examples": list(dict.fromkeys(seen))}
    return {**parameters, "properties": properties} if properties else parameters


def _error_template(calls: list[ObservedCall], key: str, tool: str) -> str:
    """The first recorded error of the tool with the key's value made a `{key}` placeholder
    (none recorded: "<entity> {key} not found")."""
    for call in calls:
        if recorded_error(call.result):
            value = recorded_value(call.result)
            text = str(value["error"]) if isinstance(value, dict) else str(value)
            given = call.arguments.get(key)
            if given is not None and str(given):
                pattern = rf"(?<!\w){re.escape(str(given))}(?!\w)"
                text = re.sub(pattern, lambda _: "{" + key + "}", text)
            return text
    return _not_found(key, tool)


# --- names, values and SQL pieces ----------------------------------------------------------


def _is_read(tool: str) -> bool:
    """A name that starts with a read verb, as a word (`get_order`, `getOrder`, `list`)."""
    for prefix in READ_PREFIXES:
        rest = tool[len(prefix) :]
        if tool.lower().startswith(prefix) and (not rest or rest[0] == "_" or rest[0].isupper()):
            return True
    return False


def _is_key(name: str) -> bool:
    return name == "id" or any(name.endswith(s) and len(name) > len(s) for s in KEY_SUFFIXES)


def _stem(key: str, tool: str) -> str:
    """The entity a key names: `order_id` → order; a bare `id`, the tool name's last word; a
    number or code, itself (`order_number` → order_number, apart from `order_id`)."""
    if key == "id":
        return tool.lower().rsplit("_", 1)[-1]
    return key.removesuffix("_id")


def _entity(key: str, tool: str) -> tuple[str, str]:
    """The table a key names and its key column: `order_id` → orders.order_id; a bare `id` →
    the `<entity>_id` of the entity the tool name's last word names (`get_user` → users.user_id)."""
    stem = _stem(key, tool)
    column = f"{stem}_id" if key == "id" else key
    if stem.endswith(("s", "x", "sh", "ch")):
        return stem + "es", column
    if stem.endswith("y") and stem[-2:-1] not in ("a", "e", "i", "o", "u"):
        return stem[:-1] + "ies", column
    return stem + "s", column


def _not_found(key: str, tool: str) -> str:
    return f"{_stem(key, tool).replace('_', ' ')} {{{key}}} not found"


def _argument_names(tool: ToolSpec, calls: list[ObservedCall]) -> list[str]:
    """The tool's argument names (the offered ones in order, then any other given), those that
    are identifiers."""
    offered = tool.parameters.get("properties")
    names = list(offered) if isinstance(offered, dict) else []
    names += sorted({n for call in calls for n in call.arguments} - set(names))
    return [n for n in names if re.match(IDENTIFIER, n)]


def _fields(results: list[Any]) -> list[str]:
    """The field names of the object results, in the order first seen, identifiers only."""
    fields: dict[str, None] = {}
    for result in results:
        if isinstance(result, dict):
            fields.update((f, None) for f in result if re.match(IDENTIFIER, f))
    return list(fields)


def _scalar(value: Any) -> bool:
    return not isinstance(value, list | dict)


def _value_kind(value: Any) -> Kind:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "json" if isinstance(value, list | dict) else "text"


def _kind(values: list[Any]) -> Kind:
    """The kind most non-null values have (integers and numbers together make number)."""
    counts = Counter(_value_kind(v) for v in values if v is not None)
    if "integer" in counts and "number" in counts:
        counts["number"] += counts.pop("integer")
    if not counts:
        return "text"
    return max(KIND_ORDER, key=lambda k: (counts[k], -KIND_ORDER.index(k)))


def _fit(value: Any, kind: Kind) -> Any:
    """The value as stored in a column of `kind`: nested values as JSON text; None when it does
    not fit."""
    if value is None:
        return None
    if kind == "json":
        return json.dumps(value, ensure_ascii=False) if not _scalar(value) else None
    have = _value_kind(value)
    return value if have == kind or (kind == "number" and have == "integer") else None


def _structure(value: Any) -> Any:
    """The `from_json` structure of a value (of the first nested one, given a column's values);
    an empty object reads back as JSON text."""
    if isinstance(value, dict) and value:
        return {k: _structure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_structure(value[0])] if value else ["JSON"]
    if value is None:
        return "NULL"
    return STRUCTURE_TYPES.get(_value_kind(value), "JSON")


def _column(field: str, column: str, kinds: dict[str, Kind], structures: dict[str, Any]) -> str:
    """The SELECT item giving a result field from its column (nested values parsed back)."""
    if kinds[column] == "json":
        shape = json.dumps(structures[column])
        return f"from_json({_quoted(column)}, {_literal(shape)}) AS {_quoted(field)}"
    return _quoted(column) if column == field else f"{_quoted(column)} AS {_quoted(field)}"


def _constant(value: Any) -> str:
    """A SQL expression for a JSON value."""
    if _scalar(value):
        return _literal(value)
    text, shape = json.dumps(value, ensure_ascii=False), json.dumps(_structure(value))
    return f"from_json({_literal(text)}, {_literal(shape)})"


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value!r}::DOUBLE"
    return "'" + str(value).replace("'", "''") + "'"


def _quoted(name: str) -> str:
    return f'"{name}"'


# --- the generator model's spec ------------------------------------------------------------


async def write_spec(
    observation: Observation,
    draft: WorldSpec,
    client: LLMClient,
    feedback: str = "",
    *,
    max_tokens: int = 4096,
    repairs: int = 1,
) -> WorldSpec:
    """The generator model's world spec for the observation, shown the tools, the recorded
    calls, the draft and `feedback` (a fidelity report's mismatches, on a refinement round).
    The reply is plain JSON (a world spec's free-form parts fit no grammar); one that is not a
    valid spec is shown its error and asked again `repairs` times, then raises LLMError
    "invalid_world_spec". The spec keeps the draft's name."""
    text = WORLD_PROMPT.render(
        name=draft.name,
        tools="\n".join(
            json.dumps(t.model_dump(mode="json"), ensure_ascii=False) for t in observation.tools
        ),
        calls=_examples(observation),
        draft=json.dumps(draft.model_dump(mode="json", exclude_defaults=True), ensure_ascii=False),
        feedback=feedback.strip()[:MAX_FEEDBACK_CHARS] or "(none: this is the first round)",
    )
    _, seed = seed_for(GENERATOR, VERSION, observation.key, draft.world_id, feedback)
    conversation = chat_messages(SYSTEM_PROMPT, text)
    error = ""
    for _ in range(repairs + 1):
        reply = await client.chat(
            "generator",
            conversation,
            temperature=0.0,
            max_tokens=max_tokens,
            seed=seed,
            response_format={"type": "json_object"},
        )
        try:
            return _parsed_spec(reply.text, draft.name)
        except ValueError as exc:  # invalid JSON or an invalid spec
            error = _spec_error(exc)
        if client.cache and reply.key:
            await asyncio.to_thread(client.cache.forget, reply.key)  # never replay garbage
        conversation = [
            *conversation,
            {"role": "assistant", "content": reply.text},
            {
                "role": "user",
                "content": f"That is not a valid world spec: {error}. Reply again with only the"
                " corrected world spec as one JSON object.",
            },
        ]
    raise LLMError("invalid_world_spec", error)


def _examples(observation: Observation) -> str:
    """The recorded calls, trace by trace: `name {arguments} -> result` (results cut)."""
    lines: list[str] = []
    shown = 0
    for number, calls in enumerate(observation.sequences, 1):
        if shown >= MAX_EXAMPLE_CALLS:
            break
        lines.append(f"trace {number}:")
        for call in calls[: MAX_EXAMPLE_CALLS - shown]:
            arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
            lines.append(f"  {call.name} {arguments} -> {call.result.strip()[:MAX_RESULT_CHARS]}")
            shown += 1
    return "\n".join(lines)


def _parsed_spec(text: str, name: str) -> WorldSpec:
    # strict=False: raw newlines inside strings (multi-line SQL) are a common, harmless quirk
    raw = json.loads(text, strict=False)
    if not isinstance(raw, dict):
        raise ValueError(f"the reply is a JSON {json_kind(raw)}, not an object")
    return WorldSpec.model_validate({**raw, "name": name})


def _spec_error(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON: {exc.msg} at char {exc.pos}"
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "spec"
        return f"{where}: {first.get('msg', 'invalid')}"[:300]
    return str(exc)[:300]
