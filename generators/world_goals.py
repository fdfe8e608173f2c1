"""Goals for planted tool-use tasks, worked backwards from a world's state.

A goal is either a change (a state-changing call that succeeds, with its arguments drawn from
the records the world holds) or a question (a read-only call and one value of the row it
returns, the answer). Each goal's gold calls pass the verifier's self-check
(`harnesses.world_check.self_check`) before it is offered: a change that no plausible wrong call
could miss, or a question the no-op cannot answer, is left out. Sampling is seeded, so the same
world, snapshot and seed give the same goals.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from harnesses.world import Snapshot, ToolDef, World, WorldSpec, column_values
from harnesses.world_check import self_check
from harnesses.world_replay import Call

TRIES_PER_TOOL = 12  # argument draws per tool before it is given up for this goal


@dataclass(frozen=True)
class Goal:
    kind: Literal["change", "question"]
    calls: list[Call]  # the gold sequence
    answer: str = ""  # a question's answer: one value of the row its call returns
    field: str = ""  # which value that is (the column asked about)


def sample_goals(spec: WorldSpec, snapshot: Snapshot, n: int, seed: int = 0) -> list[Goal]:
    """Up to `n` distinct goals that pass the self-check, drawn from changes and questions in
    turn (a world where one kind yields none still gives goals of the other)."""
    rng = random.Random(seed)
    changes = [t for t in spec.tools if t.effects]
    questions = [t for t in spec.tools if not t.effects and t.shape == "row"]
    goals: list[Goal] = []
    seen: set[str] = set()
    for attempt in range(n * 4):
        if len(goals) >= n or not (changes or questions):
            break
        pool = changes if (attempt % 2 == 0 and changes) or not questions else questions
        tool = rng.choice(pool)
        goal = _goal(spec, snapshot, tool, rng)
        key = json.dumps([goal.calls, goal.field], sort_keys=True, default=str) if goal else ""
        if goal is not None and key not in seen:
            seen.add(key)
            goals.append(goal)
    return goals


def _goal(spec: WorldSpec, snapshot: Snapshot, tool: ToolDef, rng: random.Random) -> Goal | None:
    """A goal around one call of `tool`, or None when no draw of its arguments makes one."""
    world = World(spec, snapshot)
    try:
        for arguments in _draws(spec, snapshot, tool, rng):
            result = world.call(tool.name, arguments)
            world.reset(snapshot)
            if not result.ok:
                continue
            calls: list[Call] = [(tool.name, arguments)]
            if tool.effects:
                if self_check(spec, snapshot, calls) is None:
                    return Goal("change", calls)
                continue
            question = _question(result.content, arguments, rng)
            if question and self_check(spec, snapshot, calls, question[1]) is None:
                return Goal("question", calls, answer=question[1], field=question[0])
        return None
    finally:
        world.close()


def _question(row: Any, arguments: dict[str, Any], rng: random.Random) -> tuple[str, str] | None:
    """A (column, value) of `row` to ask about: a plain value the call's arguments do not
    already give away."""
    if not isinstance(row, dict):
        return None
    given = {json.dumps(v, default=str) for v in arguments.values()}
    fields = [
        (column, value)
        for column, value in sorted(row.items())
        if isinstance(value, str | int | float)
        and not isinstance(value, bool)
        and json.dumps(value, default=str) not in given
        and column not in arguments
    ]
    if not fields:
        return None
    column, value = rng.choice(fields)
    return column, str(value)


def _draws(
    spec: WorldSpec, snapshot: Snapshot, tool: ToolDef, rng: random.Random
) -> Iterator[dict[str, Any]]:
    """Argument sets for `tool`: each required parameter from the values of the column of the
    same name where there is one, else from its schema (enum, examples, boolean, a small
    integer)."""
    columns = column_values(spec, snapshot)
    properties: dict[str, Any] = tool.parameters.get("properties", {})
    required = tool.parameters.get("required", list(properties))
    for _ in range(TRIES_PER_TOOL):
        arguments = {}
        for name in required:
            value = _draw(properties.get(name, {}), columns.get(name, []), rng)
            if value is None:
                return
            arguments[name] = value
        yield arguments


def _draw(schema: dict[str, Any], known: list[Any], rng: random.Random) -> Any:
    kind = schema.get("type")
    typed = [v for v in known if _fits(kind, v)]
    if typed:
        return rng.choice(typed)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if schema.get("examples"):
        return rng.choice(schema["examples"])
    if kind == "boolean":
        return rng.choice([True, False])
    if kind == "integer":
        low = int(schema.get("minimum", 1))
        return rng.randint(low, max(low, min(int(schema.get("maximum", low + 2)), low + 2)))
    return None  # free text the state does not suggest: no draw


def _fits(kind: str | None, value: Any) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    return False
