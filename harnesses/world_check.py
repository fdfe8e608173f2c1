"""The predicate of a planted tool-use task and its self-check, on replays of the world.

A task fixes the initial snapshot and the gold call sequence; replaying the gold calls gives
the gold final state. An attempt passes when its calls leave the world in the gold final state
(every table, row for row: nothing missing, nothing extra) and, where the task asks for a fact,
its final answer matches the gold answer (`passes`, in `data.runtime.world_grading`). Before a
task is offered, `self_check` makes sure the predicate can tell: the gold sequence passes, doing
nothing fails, and a plausible wrong sequence (the gold one with one argument pointing at
another record) fails. A generator runs the self-check on its candidates; the verifier
(`judges.world_state`) grades attempts with the same predicate.
"""

from __future__ import annotations

from data.runtime.world_grading import passes
from data.runtime.world_runtime import Call, Snapshot, WorldSpec, column_values, replay_each

__all__ = ["ALTERNATIVES", "passes", "self_check", "wrong_variants"]

ALTERNATIVES = 4  # other values tried per argument for the plausible wrong sequences


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
