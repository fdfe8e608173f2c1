"""The predicate a world task's attempt is graded by, and its grading: the attempt's calls
replayed on the task's world (`world_runtime`) must leave the gold final state (and give the gold
answer, where the task asks one); a net cast for the gold calls scores 0 before anything runs
(`call_checks`).

Grading raises `NoVerdict` where it cannot judge: the world cannot be opened (DuckDB or the
system fails), or a call the grader replays is cut off at its time limit and so is one of the
gold calls replayed just after (the machine, not the attempt, is too slow). An attempt's call
cut off where the gold calls run in time failed, as it did for the attempt.

Standalone like `world_runtime` (the modules beside it only), so the export copies it into the
verifiers v1 taskset package, whose world reward is `grade_calls`.
"""

from __future__ import annotations

import duckdb

from .answer_match import match
from .call_checks import Call, spam, too_many
from .errors import NoVerdict
from .world_runtime import CALL_TIMEOUT_S, Replay, Snapshot, WorldSpec, replay, state_diff


def passes(final: Snapshot, gold_final: Snapshot, answer: str = "", gold_answer: str = "") -> bool:
    """The predicate: the gold final state exactly, and the gold answer where there is one."""
    return final == gold_final and (not gold_answer or match(answer, gold_answer, 1.0)[0] == 1.0)


def grade_calls(
    spec: WorldSpec,
    initial: Snapshot,
    calls: list[Call],
    answer: str,
    gold_calls: list[Call],
    gold_final: Snapshot,
    gold_answer: str,
) -> tuple[float, str]:
    """A world attempt's reward and why: 0 for a net cast for the gold calls (too many calls, a
    wildcard, guessed arguments: `call_checks`) before anything runs; else `calls` replayed
    from `initial`, 1.0 when `passes`. A call of a tool the world does not have runs nothing.
    Raises `NoVerdict` where the grader cannot judge (module docstring)."""
    refused = too_many(calls, gold_calls) or spam(calls, gold_calls)
    if refused:
        return 0.0, refused
    done = _graded_replay(spec, initial, calls)
    final = done.final
    if passes(final, gold_final, answer, gold_answer):
        return 1.0, f"gold final state after {len(calls)} calls"
    if final != gold_final:
        changed = ", ".join(sorted(state_diff(gold_final, final))) or "none"
        why = f"final state differs from the gold one in: {changed}"
    else:
        why = "the gold final state, but the answer does not match"
    if done.cut_off:
        gold = _graded_replay(spec, initial, gold_calls)
        limit = f"the {CALL_TIMEOUT_S:g} s limit"
        if gold.cut_off:
            detail = f"{done.cut_off} of its calls and {gold.cut_off} of the gold calls hit {limit}"
            raise NoVerdict("grader_timeout", detail)
        why += f"; {done.cut_off} of its calls hit {limit} (the gold calls kept within it)"
    return 0.0, why


def _graded_replay(spec: WorldSpec, initial: Snapshot, calls: list[Call]) -> Replay:
    """`replay`, a world that cannot be opened or run raised as `NoVerdict`."""
    try:
        return replay(spec, initial, calls)
    except (duckdb.Error, OSError) as error:
        raise NoVerdict("world_failed", f"{type(error).__name__}: {error}"[:300]) from error
