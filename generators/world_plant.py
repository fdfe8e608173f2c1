"""Planting a goal's records into a fresh snapshot: distractors and descriptions.

Distractors make a task harder to get right by luck: for each record a gold call names (a row
whose single-column key is one of the call's arguments), sibling records are planted beside it:
copies with a new key that still belong to the same parent (the same customer, the same flight)
and differ in their numbers and dates, so a solver that picks "an order of this customer" at
random picks the wrong one. Only rows that point at a parent (a column ending in `_id` that is
not their key) get siblings: a copy of a customer or a product would be a confusing duplicate,
not a plausible other record.

A description replaces a record's key in the instruction by values the solver can find it by
(`description`): a customer's e-mail where a tool finds customers by e-mail, or an order's date
together with its customer's e-mail where a tool lists a customer's orders. The solver has to
look the key up.
"""

from __future__ import annotations

import random
import re
from copy import deepcopy
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from harnesses.world import Snapshot, WorldSpec
from harnesses.world_replay import Call

TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


@dataclass(frozen=True)
class Named:
    """A record a gold call names: its table, key column and key value."""

    table: str
    column: str
    value: Any


def named_records(spec: WorldSpec, snapshot: Snapshot, calls: list[Call]) -> list[Named]:
    """The records the calls name through an argument of the same name as a table's single
    key column, each once, in call order."""
    found: list[Named] = []
    for _, arguments in calls:
        for argument, value in arguments.items():
            for table, schema in spec.tables.items():
                if schema.key != [argument]:
                    continue
                named = Named(table, argument, value)
                if named not in found and any(r.get(argument) == value for r in snapshot[table]):
                    found.append(named)
    return found


def plant_distractors(
    spec: WorldSpec, snapshot: Snapshot, calls: list[Call], count: int, rng: random.Random
) -> Snapshot:
    """`snapshot` with `count` siblings of each named record that has a parent (see the
    module docstring); the original records are untouched."""
    planted = deepcopy(snapshot)
    for named in named_records(spec, snapshot, calls):
        schema = spec.tables[named.table]
        parents = [c for c in schema.columns if c.endswith("_id") and c not in schema.key]
        if not parents:
            continue
        row = next(r for r in planted[named.table] if r.get(named.column) == named.value)
        for _ in range(count):
            sibling = {
                column: _nudged(value, schema.columns[column], rng)
                if column not in parents
                else value
                for column, value in row.items()
            }
            taken = [r[named.column] for r in planted[named.table]]
            sibling[named.column] = _new_key(named.value, taken)
            planted[named.table].append(sibling)
    return planted


def description(spec: WorldSpec, snapshot: Snapshot, named: Named) -> list[tuple[str, Any]]:
    """How an instruction can name a record without its key, as (line for the writer, value
    to state) pairs, the record's own first; empty when it cannot. Either a value of the
    record's row that no other row shares and a read tool takes as an argument (a customer by
    e-mail), or its parent so described and a value no sibling shares, where a read tool takes
    the parent's key (a customer's order by its date: find the customer, list their orders)."""
    rows = snapshot[named.table]
    row = next((r for r in rows if r.get(named.column) == named.value), None)
    if row is None:
        return []
    lookups = {
        argument
        for tool in spec.tools
        if not tool.effects
        for argument in tool.parameters.get("properties", {})
    }
    own = _unique_value(spec, named.table, rows, row, lookups)
    if own is not None:
        return [(f"{named.table} {named.value} as {own[0]} {own[1]}", own[1])]
    for column, value in row.items():
        parent = next(
            (t for t, schema in spec.tables.items() if schema.key == [column] and t != named.table),
            None,
        )
        if parent is None or column not in lookups:
            continue
        above = description(spec, snapshot, Named(parent, column, value))
        siblings = [r for r in rows if r.get(column) == value]
        mine = _unique_value(spec, named.table, siblings, row, None)
        if above and mine is not None:
            line = f"{named.table} {named.value}: {parent} {value}'s with {mine[0]} {mine[1]}"
            return [(line, mine[1]), *above]
    return []


def _unique_value(
    spec: WorldSpec,
    table: str,
    rows: list[dict[str, Any]],
    row: dict[str, Any],
    lookups: set[str] | None,
) -> tuple[str, Any] | None:
    """A (column, value) of `row`, text or date and not an id (and among `lookups` where
    given), that no other of `rows` shares; text columns first."""
    schema = spec.tables[table]
    columns = [
        c
        for c, kind in schema.columns.items()
        if kind in ("text", "date")
        and c not in schema.key
        and not c.endswith("_id")
        and (lookups is None or c in lookups)
    ]
    for column in sorted(columns, key=lambda c: schema.columns[c] != "text"):
        value = row.get(column)
        if value is not None and sum(r.get(column) == value for r in rows) == 1:
            return column, value
    return None


def _new_key(value: Any, taken: list[Any]) -> Any:
    """A key of the same form as `value` that no row holds: the next integer, or the text with
    its trailing number counted on (`C-1004` -> `C-1005`), else a numbered suffix."""
    if isinstance(value, int):
        return max([v for v in taken if isinstance(v, int)] + [value]) + 1
    text = str(value)
    match = TRAILING_NUMBER.match(text)
    prefix, width = (match.group(1), len(match.group(2))) if match else (f"{text}-", 1)
    numbers = [
        int(m.group(2))
        for v in taken
        if (m := TRAILING_NUMBER.match(str(v))) and m.group(1) == prefix
    ]
    return f"{prefix}{max(numbers, default=0) + 1:0{width}d}"


def _nudged(value: Any, kind: str, rng: random.Random) -> Any:
    """Another plausible value of the same type: numbers scaled by 60-140% (at least one apart),
    dates moved by up to three weeks; text and booleans unchanged."""
    if value is None or isinstance(value, bool):
        return value
    if kind == "integer" and isinstance(value, int):
        return max(0, value + _step(value, rng))
    if kind == "number" and isinstance(value, int | float):
        return round(max(0.0, value + _step(value, rng)), 2)
    if kind == "date" and isinstance(value, str):
        days = rng.choice([-1, 1]) * rng.randint(1, 21)
        return (date.fromisoformat(value) + timedelta(days=days)).isoformat()
    return value


def _step(value: float, rng: random.Random) -> int:
    size = max(1, round(abs(value) * rng.uniform(0.1, 0.4)))
    return rng.choice([-1, 1]) * size if value > size else size
