"""Simulated tool worlds: typed state in an in-memory DuckDB, tools declared as SQL; replaying
tool calls on them (the predicate a world task's attempt is graded by: `world_grading`).

This module is taskfoundry's one world runtime and is standalone: it imports only the standard
library, duckdb, jsonschema, pydantic and the modules beside it (`call_checks`), so the
export copies it as it is into the verifiers v1 taskset package
(`data/export/verifiers_package.py`), whose tool server and reward use it without taskfoundry.
`harnesses.world`, `harnesses.world_replay` and `harnesses.world_check` build on it.

A world spec (TOML or JSON, `WorldSpec`) names its tables (typed columns and a key), seed rows
and tools. A tool has JSON-schema parameters (the OpenAI tools format) and, in order:

- `checks`: queries that must return a row, else the call fails with the check's `error`;
- `effects`: statements that change the state (INSERT, UPDATE, DELETE);
- `result`: a query whose rows are the call's result (`returns`: "rows", "row" or "none").

The call's arguments are the statements' `$name` parameters (an argument not given is NULL).
A call runs in one transaction, so a failed call changes nothing. Nothing in a world is random,
so the same calls from the same snapshot give the same results and the same final state. A spec
may be written by a model, so its SQL is held to its tables: each check and result is one
SELECT and each effect one INSERT, UPDATE or DELETE (no DDL, SET, ATTACH or transaction
control); the database runs with external access off (no files, no network), its configuration
locked, a memory limit, and each call is interrupted after `CALL_TIMEOUT_S`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import threading
import tomllib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import duckdb
import jsonschema
from pydantic import BaseModel, ConfigDict, Field, model_validator

from .call_checks import Call

ColumnType = Literal["text", "integer", "number", "boolean", "date", "timestamp"]
SQL_TYPES: dict[str, str] = {
    "text": "VARCHAR",
    "integer": "BIGINT",
    "number": "DOUBLE",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
}
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
TOOL_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"  # as the OpenAI tools format allows; never SQL
CALL_TIMEOUT_S = 10.0
MEMORY_LIMIT = "256MB"
QUERY = {duckdb.StatementType.SELECT}
CHANGE = {duckdb.StatementType.INSERT, duckdb.StatementType.UPDATE, duckdb.StatementType.DELETE}

Snapshot = dict[str, list[dict[str, Any]]]  # rows per table, JSON values, in key order


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _one_statement(sql: str, allowed: set[duckdb.StatementType], what: str) -> str:
    """`sql` when it is one statement of an allowed type, else a ValueError saying why."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as error:
        raise ValueError(f"{what} does not parse: {str(error).splitlines()[0]}") from error
    kinds = sorted(s.type.name for s in statements)
    if len(statements) != 1 or statements[0].type not in allowed:
        names = " or ".join(sorted(t.name for t in allowed))
        raise ValueError(f"{what} must be one {names} statement, not {', '.join(kinds) or 'none'}")
    return sql


def _identifiers(names: Iterable[str], what: str) -> None:
    """Raise unless every name is a plain SQL identifier (it is quoted into statements)."""
    for name in names:
        if not re.match(IDENTIFIER, name):
            raise ValueError(f"{what} name {name!r} is not an identifier")


class TableSpec(_Spec):
    columns: dict[str, ColumnType] = Field(min_length=1)
    key: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _key_is_columns(self) -> TableSpec:
        _identifiers(self.columns, "column")
        missing = [k for k in self.key if k not in self.columns]
        if missing:
            raise ValueError(f"key columns {missing} are not columns")
        return self


class Check(_Spec):
    """A query that must return a row for the call to go on; `error` (with `{argument}`
    placeholders) is what the caller is told otherwise."""

    sql: str
    error: str

    @model_validator(mode="after")
    def _a_query(self) -> Check:
        _one_statement(self.sql, QUERY, "a check")
        return self


class ToolDef(_Spec):
    name: str = Field(pattern=TOOL_NAME)
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    checks: list[Check] = Field(default_factory=list)
    effects: list[str] = Field(default_factory=list)
    result: str | None = None
    returns: Literal["rows", "row", "none"] | None = None  # default: rows with a result query

    @model_validator(mode="after")
    def _well_formed(self) -> ToolDef:
        jsonschema.Draft202012Validator.check_schema(self.parameters)
        if self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name}: parameters must be a JSON-schema object")
        if self.returns is not None and (self.result is None) != (self.returns == "none"):
            raise ValueError(f"tool {self.name}: a result query goes with returns rows or row")
        for effect in self.effects:
            _one_statement(effect, CHANGE, f"tool {self.name}: an effect")
        if self.result is not None:
            _one_statement(self.result, QUERY, f"tool {self.name}: the result")
        return self

    @property
    def shape(self) -> str:
        """What a call returns: "rows", "row" or "none"."""
        return self.returns or ("rows" if self.result is not None else "none")

    def openai(self) -> dict[str, Any]:
        """The tool in the OpenAI tools format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class WorldSpec(_Spec):
    """A world: its tables, seed rows and tools."""

    name: str = Field(pattern=IDENTIFIER)
    version: str = "1"
    description: str = ""
    tables: dict[str, TableSpec] = Field(min_length=1)
    seed: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    tools: list[ToolDef] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> WorldSpec:
        _identifiers(self.tables, "table")
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names repeat: {sorted(names)}")
        for table, rows in self.seed.items():
            if table not in self.tables:
                raise ValueError(f"seed rows for unknown table {table!r}")
            for row in rows:
                unknown = set(row) - set(self.tables[table].columns)
                if unknown:
                    raise ValueError(f"seed row of {table} has unknown columns {sorted(unknown)}")
        return self

    @property
    def world_id(self) -> str:
        """`name@version#hash`: the hash is of the whole spec, so an edited world is another."""
        canonical = json.dumps(
            ["world", self.model_dump(mode="json")],
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:8]
        return f"{self.name}@{self.version}#{digest}"

    def openai_tools(self) -> list[dict[str, Any]]:
        return [tool.openai() for tool in self.tools]


def load_world_spec(path: Path) -> WorldSpec:
    """A world spec from a `.toml` or `.json` file."""
    text = path.read_text(encoding="utf-8")
    raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    return WorldSpec.model_validate(raw)


@dataclass(frozen=True)
class ToolResult:
    """What a tool call returned: `ok` and its `content` (JSON values), or the `error` (and
    whether it was cut off at the time limit)."""

    ok: bool
    content: Any = None
    error: str = ""
    timed_out: bool = False

    def message(self) -> str:
        """The result as the tool message a model reads."""
        if not self.ok:
            return json.dumps({"error": self.error})
        return json.dumps(self.content, ensure_ascii=False, sort_keys=True, default=str)


class World:
    """A running world: its state, its tools, a snapshot of the state at any time."""

    def __init__(self, spec: WorldSpec, snapshot: Snapshot | None = None) -> None:
        self.spec = spec
        self._tools = {tool.name: tool for tool in spec.tools}
        self._con = duckdb.connect(
            ":memory:",
            config={
                "enable_external_access": False,
                "memory_limit": MEMORY_LIMIT,
                "lock_configuration": True,
            },
        )
        for table, schema in spec.tables.items():
            columns = ", ".join(f'"{c}" {SQL_TYPES[t]}' for c, t in schema.columns.items())
            key = ", ".join(f'"{k}"' for k in schema.key)
            self._con.execute(f'CREATE TABLE "{table}" ({columns}, PRIMARY KEY ({key}))')
        self._at: Snapshot | None = None  # the snapshot the state was last put back to
        self._changed = True  # whether the state may differ from `_at` (or the seed rows)
        self.reset(snapshot)

    def reset(self, snapshot: Snapshot | None = None) -> None:
        """Put the state back to `snapshot` (default: the spec's seed rows). Nothing is done
        when the state is still the one the same snapshot object gave it (no call changed it
        since): a snapshot is never changed in place once made."""
        if not self._changed and snapshot is self._at:
            return
        rows = self.spec.seed if snapshot is None else snapshot
        self._con.execute("BEGIN")
        for table, schema in self.spec.tables.items():
            self._con.execute(f'DELETE FROM "{table}"')
            columns = list(schema.columns)
            names = ", ".join(f'"{c}"' for c in columns)
            marks = "(" + ", ".join("?" for _ in columns) + ")"
            values = [row.get(c) for row in rows.get(table, []) for c in columns]
            if values:  # one statement for all rows: executemany runs one per row
                count = len(values) // len(columns)
                self._con.execute(
                    f'INSERT INTO "{table}" ({names}) VALUES {", ".join([marks] * count)}', values
                )
        self._con.execute("COMMIT")
        self._at, self._changed = snapshot, False

    def snapshot(self) -> Snapshot:
        """Every table's rows (JSON values) in key order."""
        return {table: self._rows(table, schema) for table, schema in self.spec.tables.items()}

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a read-only query over the state (for verifiers)."""
        self._changed = True  # nothing holds a query to reading: the next reset is made
        return self._select(sql, parameters or {})

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run tool `name` with `arguments`; a failure leaves the state as it was."""
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult(False, error=f"unknown tool {name!r}")
        problem = _argument_problem(tool, arguments)
        if problem:
            return ToolResult(False, error=f"invalid arguments: {problem}")
        watchdog = threading.Timer(CALL_TIMEOUT_S, self._con.interrupt)
        watchdog.start()
        changed_before, self._changed = self._changed, True  # until known to be unchanged
        try:
            self._con.execute("BEGIN")
            for check in tool.checks:
                if not self._select(check.sql, arguments):
                    self._con.execute("ROLLBACK")
                    self._changed = changed_before
                    return ToolResult(False, error=_fill(check.error, arguments))
            for statement in tool.effects:
                self._con.execute(statement, _bound(statement, arguments))
            content: Any = {"ok": True}
            if tool.result is not None:
                rows = self._select(tool.result, arguments)
                content = rows if tool.shape == "rows" else (rows[0] if rows else None)
            self._con.execute("COMMIT")
            self._changed = changed_before or bool(tool.effects)
        except duckdb.Error as error:
            self._rollback()
            if isinstance(error, duckdb.InterruptException):
                why = f"the call ran longer than {CALL_TIMEOUT_S:g} s"
                return ToolResult(False, error=why, timed_out=True)
            return ToolResult(False, error=f"{type(error).__name__}: {error}".splitlines()[0])
        finally:
            watchdog.cancel()
        return ToolResult(True, content)

    def _rollback(self) -> None:
        with contextlib.suppress(duckdb.Error):  # the failure may have ended the transaction
            self._con.execute("ROLLBACK")

    def close(self) -> None:
        self._con.close()

    def _select(self, sql: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
        cursor = self._con.execute(sql, _bound(sql, arguments))
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, map(_json_value, row), strict=True)) for row in cursor.fetchall()]

    def _rows(self, table: str, schema: TableSpec) -> list[dict[str, Any]]:
        order = ", ".join(f'"{k}"' for k in schema.key)
        return self._select(f'SELECT * FROM "{table}" ORDER BY {order}', {})


def column_values(spec: WorldSpec, snapshot: Snapshot) -> dict[str, list[Any]]:
    """Each column name's distinct values across the tables, in the order first seen."""
    values: dict[str, list[Any]] = {}
    for table, rows in snapshot.items():
        for column in spec.tables[table].columns:
            seen = values.setdefault(column, [])
            for row in rows:
                if row.get(column) is not None and row[column] not in seen:
                    seen.append(row[column])
    return values


def _bound(sql: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The `$name` parameters `sql` uses, from `arguments` (NULL where not given)."""
    return {name: arguments.get(name) for name in _parameter_names(sql)}


@functools.lru_cache(maxsize=4096)
def _parameter_names(sql: str) -> tuple[str, ...]:
    """The `$name` parameters of `sql` as DuckDB's parser finds them (a `$word` in a string or a
    comment is none); a world's few statements are parsed once per process."""
    (statement,) = duckdb.extract_statements(sql)
    return tuple(sorted(statement.named_parameters))


def _argument_problem(tool: ToolDef, arguments: dict[str, Any]) -> str:
    if not isinstance(arguments, dict):
        return "arguments must be an object"
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(tool.parameters).iter_errors(arguments)
    )
    return error.message if error is not None else ""


def _fill(template: str, arguments: dict[str, Any]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: str(arguments.get(m.group(1), m.group(0))), template)


def _json_value(value: Any) -> Any:
    """`value` as JSON: lists and structs converted inside, dates and times as ISO text,
    decimals as numbers, any other non-JSON value (UUID, interval, blob) as text."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return str(value)


# --- replaying calls ------------------------------------------------------------------------

IDLE_WORLDS = 8  # worlds kept open for the next replay, in all
_IDLE: list[World] = []  # least recently used first
_IDLE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Replay:
    """What a call sequence did from a snapshot: each call's result message and the final
    state; how many calls failed, and how many of those were cut off at the time limit."""

    messages: list[str]
    final: Snapshot
    failed_calls: int
    cut_off: int = 0


def replay(spec: WorldSpec, initial: Snapshot, calls: list[Call]) -> Replay:
    """Run `calls` on a fresh copy of the world at `initial`."""
    return replay_each(spec, initial, [calls])[0]


def replay_each(spec: WorldSpec, initial: Snapshot, sequences: list[list[Call]]) -> list[Replay]:
    """Run each call sequence from `initial` (one world, reset before each)."""
    with _world_at(spec, initial) as world:
        replays = []
        for index, calls in enumerate(sequences):
            if index:
                world.reset(initial)
            results = [world.call(name, arguments) for name, arguments in calls]
            failed, cut = sum(not r.ok for r in results), sum(r.timed_out for r in results)
            replays.append(Replay([r.message() for r in results], world.snapshot(), failed, cut))
        return replays


@contextmanager
def _world_at(spec: WorldSpec, initial: Snapshot) -> Iterator[World]:
    """A world of `spec` at `initial`: an idle one, reset, else a new one. Opening a DuckDB
    database and creating the tables is half a replay's cost, and a trainer scores the same
    few worlds over and over. Idle worlds are shared by the process's threads (one at a time
    each), at most `IDLE_WORLDS` of them: each holds a database and its threads."""
    with _IDLE_LOCK:
        world = next((w for w in _IDLE if w.spec.world_id == spec.world_id), None)
        if world is not None:
            _IDLE.remove(world)
    if world is None:
        world = World(spec, initial)
    else:
        world.reset(initial)
    try:
        yield world
    finally:
        with _IDLE_LOCK:
            _IDLE.append(world)
            retired = _IDLE.pop(0) if len(_IDLE) > IDLE_WORLDS else None
        if retired is not None:
            retired.close()


def state_diff(before: Snapshot, after: Snapshot) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per table, the rows only `before` has (`removed`) and only `after` has (`added`); a
    changed row is one of each."""
    diff = {}
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, []), after.get(table, [])
        removed = [row for row in old if row not in new]
        added = [row for row in new if row not in old]
        if removed or added:
            diff[table] = {"removed": removed, "added": added}
    return diff


def conversation_attempt(messages: list[dict[str, Any]]) -> tuple[list[Call], str]:
    """The calls a conversation made and its final answer: its assistant messages' tool calls
    (OpenAI's nested `function` form or a flat `name`/`arguments` one, the arguments as JSON
    text or an object) and the last message's text, unless that message makes calls."""
    made: list[Call] = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function", call)
            arguments = function.get("arguments") or {}
            try:
                parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
            except json.JSONDecodeError:
                continue  # a call whose arguments were not JSON ran nothing
            made.append((str(function.get("name", "")), parsed))
    last = messages[-1] if messages else {}
    answer = "" if last.get("tool_calls") else str(last.get("content") or "")
    return made, answer
