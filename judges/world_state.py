"""The verifier of a planted tool-use task: a predicate over the world's final state.

A task fixes the initial snapshot and the gold call sequence; replaying the gold calls gives
the gold final state. An attempt passes when its calls leave the world in the gold final state
(every table, row for row: nothing missing, nothing extra) and, where the task asks for a fact,
its final answer matches the gold answer. Before a task is accepted, `self_check` makes sure
the predicate can tell: the gold sequence passes, doing nothing fails, and a plausible wrong
sequence (the gold one with one argument pointing at another record) fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harnesses.world import Snapshot, World, WorldSpec, column_values
from judges.answer_match import match

Call = tuple[str, dict[str, Any]]  # tool name, arguments
ALTERNATIVES = 4  # other values tried per argument for the plausible wrong sequences


@dataclass(frozen=True)
class Replay:
    """What a call sequence did from a snapshot: each call's result message and the final
    state."""

    messages: list[str]
    final: Snapshot
    failed_calls: int


def replay(spec: WorldSpec, initial: Snapshot, calls: list[Call]) -> Replay:
    """Run `calls` on a fresh copy of the world at `initial`."""
    world = World(spec, initial)
    try:
        results = [world.call(name, arguments) for name, arguments in calls]
        return Replay(
            [r.message() for r in results], world.snapshot(), sum(not r.ok for r in results)
        )
    finally:
        world.close()


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
    """Why the task's predicate cannot be trusted, or None. The gold calls must all succeed
    and pass; doing nothing must fail; and where the gold calls change the state, some
    plausible wrong sequence (every call succeeding, another final state) must exist and
    fail, so the task can be got wrong in a way that matters."""
    done = replay(spec, initial, gold)
    if done.failed_calls:
        first = next(m for m in done.messages if m.startswith('{"error"'))
        return f"gold_call_failed: {first}"
    if not passes(done.final, done.final, gold_answer, gold_answer):
        return "gold_answer_does_not_match_itself"
    if passes(initial, done.final, "", gold_answer):
        return "no_op_passes"
    if done.final == initial:
        return None  # a question: the answer decides, and the no-op gives none
    wrong = [
        attempt
        for attempt in (replay(spec, initial, v) for v in wrong_variants(spec, initial, gold))
        if not attempt.failed_calls and attempt.final not in (done.final, initial)
    ]
    if not wrong:
        return "no_plausible_wrong_sequence"
    if any(passes(attempt.final, done.final) for attempt in wrong):
        return "wrong_sequence_passes"
    return None
