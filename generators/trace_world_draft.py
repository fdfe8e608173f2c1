"""The mechanical draft of a world from its traces' observed calls: one table per entity the
calls name, a read or write tool per observed tool (its SQL from the arguments and results
seen), the tables seeded from the recorded results."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema

from data.lake import ToolSpec
from generators.checks import CheckFailure
from generators.trace_world_sql import (
    POSITION,
    Kind,
    argument_names,
    common_kind,
    entity_of,
    field_names,
    inferred_parameters,
    is_key,
    is_read,
    is_scalar,
    json_structure,
    not_found,
    quoted,
    select_item,
    sql_constant,
    sql_literal,
    stem_of,
    stored_value,
)
from harnesses.observed_calls import (
    Observation,
    ObservedCall,
    json_kind,
    recorded_error,
    recorded_value,
)
from harnesses.world import IDENTIFIER, WorldSpec


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
                column: "integer" if column == POSITION else common_kind(values)
                for column, values in columns.items()
            }
            for table, columns in self.values.items()
        }

    def structures(self, kinds: dict[str, dict[str, Kind]]) -> dict[str, dict[str, Any]]:
        """The `from_json` structure of each nested column: its first nested value's."""
        return {
            table: {
                column: json_structure(next(v for v in values if not is_scalar(v)))
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
    names = argument_names(tool, calls)
    scalars = [n for n in names if all(is_scalar(c.arguments.get(n)) for c in calls)]
    keys = sorted(
        (n for n in scalars if is_key(n)), key=lambda n: stem_of(n, tool.name) not in tool.name
    )
    for key in keys:
        table, column = entity_of(key, tool.name)
        tables.add(table, [column])
        for call in succeeded:
            if call.arguments.get(key) is not None:
                tables.seed(table, {column: call.arguments[key]})
    error = _error_template(calls, keys[0], tool.name) if keys else ""
    if is_read(tool.name):
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
        (table, column), fields = entity_of(keys[0], tool.name), field_names(results)
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
    fields = field_names([i for found in items for i in found]) or ["value"]
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
    fields = field_names(objects)
    first = {f: next((o[f] for o in objects if o.get(f) is not None), None) for f in fields}
    generated = next(
        (
            f
            for f in fields
            if is_key(f) and f not in scalars and json_kind(first[f]) in ("string", "number")
        ),
        "",
    )
    constants = {f: first[f] for f in fields if f not in scalars and f != generated}
    if keys and not generated:
        (table, column), written = (
            entity_of(keys[0], tool.name),
            [n for n in scalars if n != keys[0]],
        )
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
    table, column = entity_of(generated, tool.name) if generated else (f"{tool.name}_log", POSITION)
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
            select_item(f, plan.aliases.get(f, f), kinds[plan.table], structures[plan.table])
            for f in plan.fields
        )
        result = f"SELECT {columns or '*'} FROM {quoted(plan.table)}"
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
    return " AND ".join(f"{quoted(c)} = ${a}" for c, a in plan.match.items())


def _update(plan: _Plan, effects: list[str]) -> str:
    """UPDATE the entity with the arguments written (into `effects`); the result query gives
    each field the argument of its name, else its constant."""
    if plan.written:
        assignments = ", ".join(f"{quoted(n)} = ${n}" for n in plan.written)
        effects.append(f"UPDATE {quoted(plan.table)} SET {assignments} WHERE {_where(plan)}")
    values = [
        f"{sql_constant(plan.constants[f]) if f in plan.constants else '$' + f} AS {quoted(f)}"
        for f in plan.fields
    ]
    return f"SELECT {', '.join(values)}"


def _checks(plan: _Plan) -> list[dict[str, str]]:
    """That the record each key argument names exists; the entity's error as recorded."""
    return [
        {
            "sql": "SELECT 1 FROM {} WHERE {} = ${}".format(
                *map(quoted, entity_of(key, plan.tool.name)), key
            ),
            "error": plan.error if i == 0 else not_found(key, plan.tool.name),
        }
        for i, key in enumerate(plan.keys)
    ]


def _insert(plan: _Plan, kinds: dict[str, Kind]) -> str:
    """INSERT the call's record with the next key: the prefix and one more than the largest
    number a key ends in (text keys), or one more than the largest key."""
    key = quoted(plan.generated)
    if kinds[plan.generated] == "text":
        number = f"TRY_CAST(regexp_extract({key}, '[0-9]+$') AS BIGINT)"
        following = f"{sql_literal(plan.prefix)} || (coalesce(max({number}), 0) + 1)"
    else:
        following = f"coalesce(max({key}), 0) + 1"
    values = {
        plan.generated: following,
        **{n: f"${n}" for n in plan.written},
        **{f: sql_literal(stored_value(v, kinds[f])) for f, v in plan.constants.items()},
    }
    columns = ", ".join(quoted(c) for c in values)
    return (
        f"INSERT INTO {quoted(plan.table)} ({columns})"
        f" SELECT {', '.join(values.values())} FROM {quoted(plan.table)}"
    )


def _newest(plan: _Plan, kinds: dict[str, Kind]) -> str:
    """The order that puts the record just inserted first: its key is the largest."""
    key = quoted(plan.generated)
    if kinds[plan.generated] == "text":
        return f"TRY_CAST(regexp_extract({key}, '[0-9]+$') AS BIGINT) DESC NULLS LAST"
    return f"{key} DESC"


def _seed(tables: _Tables, kinds: dict[str, dict[str, Kind]]) -> dict[str, list[dict[str, Any]]]:
    """The seed rows with values fitted to their columns; rows without a whole key left out."""
    seed: dict[str, list[dict[str, Any]]] = {}
    for table, rows in tables.rows.items():
        fitted = [
            {c: stored_value(v, kinds[table][c]) for c, v in row.items()} for row in rows.values()
        ]
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
    parameters = dict(tool.parameters) if valid else inferred_parameters(calls)
    properties = dict(parameters.get("properties") or {})
    for name, schema in properties.items():
        seen = [
            c.arguments[name]
            for c in calls
            if c.arguments.get(name) is not None and is_scalar(c.arguments[name])
        ]
        if not is_key(name) and seen:
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
    return not_found(key, tool)
