"""The verifier of a planted tool-use task: a predicate over the world's final state.

A task fixes the initial snapshot and the gold call sequence; replaying the gold calls gives
the gold final state. An attempt passes when its calls leave the world in the gold final state
(every table, row for row: nothing missing, nothing extra) and, where the task asks for a fact,
its final answer matches the gold answer. Before a task is accepted, `self_check` makes sure
the predicate can tell: the gold sequence passes, doing nothing fails, and a plausible wrong
sequence (the gold one with one argument pointing at another record) fails.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from data.records import Task
from harnesses.world import Snapshot, World, WorldSpec, column_values
from judges.answer_match import match
from judges.score import Score
from judges.tool_calls import parse_calls

Call = tuple[str, dict[str, Any]]  # tool name, arguments
ALTERNATIVES = 4  # other values tried per argument for the plausible wrong sequences
IDLE_WORLDS = 8  # worlds kept open for the next replay, in all
_IDLE: list[World] = []  # least recently used first
_IDLE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Replay:
    """What a call sequence did from a snapshot: each call's result message and the final
    state."""

    messages: list[str]
    final: Snapshot
    failed_calls: int


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
            failed = sum(not r.ok for r in results)
            replays.append(Replay([r.message() for r in results], world.snapshot(), failed))
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


def passes(final: Snapshot, gold_final: Snapshot, answer: str = "", gold_answer: str = "") -> bool:
    """The predicate: the gold final state exactly, and the gold answer where there is one."""
    return final == gold_final and (not gold_answer or match(answer, gold_answer, 1.0)[0] == 1.0)


def wrong_variants(spec: WorldSpec, initial: Snapshot, gold: list[Call]) -> list[list[Call]]:
    """Plausible wrong sequences: the gold one with one argument of one call swapped for
    another value its column holds in the initial state (another order, another product; up
    to `ALTERNATIVES` of them), the last calls first (they usually make the change)."""
    values = column_values(spec, initial)
    variants = []
    for index in reversed(range(len(gold))):
        name, arguments = gold[index]
        for key, value in sorted(arguments.items()):
            others = [other for other in values.get(key, []) if other != value]
            for other in others[:ALTERNATIVES]:
                changed = {**arguments, key: other}
                variants.append([*gold[:index], (name, changed), *gold[index + 1 :]])
    return variants


def self_check(
    spec: WorldSpec, initial: Snapshot, gold: list[Call], gold_answer: str = ""
) -> str | None:
    """Why the task's predicate cannot be trusted, or None. The gold calls must all succeed,
    give the same results and state when replayed again, and pass; doing nothing must fail;
    and where the gold calls change the state, some plausible wrong sequence (every call
    succeeding, a final state that is neither the gold one nor the initial one) must exist:
    the predicate, exact on the state, rejects it. A question is decided by its answer, which
    the no-op does not give."""
    variants = wrong_variants(spec, initial, gold)
    done, again, *attempts = replay_each(spec, initial, [gold, gold, *variants])
    if done.failed_calls:
        first = next(m for m in done.messages if m.startswith('{"error"'))
        return f"gold_call_failed: {first}"
    if again != done:  # e.g. SQL using random() or now()
        return "nondeterministic_world"
    if not passes(done.final, done.final, gold_answer, gold_answer):
        return "gold_answer_does_not_match_itself"
    if passes(initial, done.final, "", gold_answer):
        return "no_op_passes"
    if done.final == initial:
        return None  # a question: the answer decides, and the no-op gives none
    wrong = [
        attempt
        for attempt in attempts
        if not attempt.failed_calls and attempt.final not in (done.final, initial)
    ]
    return None if wrong else "no_plausible_wrong_sequence"


# --- tasks -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _spec(text: str) -> WorldSpec:
    return WorldSpec.model_validate_json(text)


def world_spec(task: Task) -> WorldSpec:
    """The world a tool-use task acts on (parsed once per distinct spec)."""
    if task.world is None:
        raise ValueError(f"task {task.task_id} has no world")
    return _spec(task.world.spec)


def gold_calls(task: Task) -> list[Call]:
    return [(call.name, dict(call.arguments)) for call in task.verifier.tool_calls]


def attempt_of(completion: str | list[dict[str, Any]]) -> tuple[list[Call], str] | None:
    """The calls an attempt made and its final answer: from the harness's attempt JSON
    (`{"calls": [{"name", "arguments"}], "answer"}`), or from a trainer's conversational
    completion (its assistant messages' tool calls, the last message's text the answer). None
    when it is neither."""
    if isinstance(completion, str):
        calls = parse_calls(completion)
        if calls is None:
            return None
        answer = str(json.loads(completion).get("answer") or "")
        return [(c.name, dict(c.arguments)) for c in calls], answer
    made: list[Call] = []
    for message in completion:
        for call in message.get("tool_calls") or []:
            function = call.get("function", call)
            arguments = function.get("arguments") or {}
            try:
                parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
            except json.JSONDecodeError:
                continue  # a call whose arguments were not JSON ran nothing
            made.append((str(function.get("name", "")), parsed))
    last = completion[-1] if completion else {}
    answer = "" if last.get("tool_calls") else str(last.get("content") or "")
    return made, answer


def grade(task: Task, completion: str | list[dict[str, Any]]) -> Score:
    """Replay the attempt's calls on the task's world from its initial state; 1.0 when that
    leaves the gold final state (and the answer matches, where the task asks a question)."""
    attempt = attempt_of(completion)
    if attempt is None:
        return Score(0.0, "not a tool-use attempt")
    if task.world is None or task.verifier.final_state is None:
        return Score(0.0, "the task has no world to replay on")
    calls, answer = attempt
    done = replay(world_spec(task), task.world.initial, calls)
    gold_final = task.verifier.final_state
    if passes(done.final, gold_final, answer, task.answer):
        return Score(1.0, f"gold final state after {len(calls)} calls", exact=True)
    if done.final != gold_final:
        changed = ", ".join(sorted(state_diff(gold_final, done.final))) or "none"
        return Score(0.0, f"final state differs from the gold one in: {changed}")
    return Score(0.0, "the gold final state, but the answer does not match")


def task_self_check(task: Task) -> str | None:
    """`self_check` on a stored task, plus: its recorded final state is the gold calls'."""
    if task.world is None or task.verifier.final_state is None:
        return "no_world"
    spec, initial, calls = world_spec(task), task.world.initial, gold_calls(task)
    failure = self_check(spec, initial, calls, task.answer)
    if failure is not None:
        return failure
    if replay(spec, initial, calls).final != task.verifier.final_state:
        return "recorded_final_state_is_not_the_gold_calls_state"
    return None
