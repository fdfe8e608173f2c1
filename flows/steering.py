"""Where `foundry loop` takes a train task next, given what the round's new policy did with it.

The policy is measured on every verified task (`calibrate:<policy>`). A task of the round's
train split is then moved toward the policy's band, or made to target its failure:
- too easy for the policy: a variant one level harder (the repair ladder's move);
- too hard: a variant one level easier, which targets the failure; where the ladder has no
  easier level left, a sibling at the task's own level;
- in the band and failed at least once: a sibling (another question from the same source at
  the same level), which targets the failure.
So the policy's failures pick the sources, the levels and the families the next round draws
more of. The eval split is never steered: its tasks and the policy's results on them stay
held out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from data.lake import Attempt, Direction, Lineage, TargetRef
from flows.repair import Move, Stop, next_move
from generators.knobs import Ladder, Level

FAILURE_CHARS = 60  # a failure kind is the first clause of the verifier's reason, this long at most


def failure_kind(reason: str) -> str:
    """What kind of failure a verifier's reason names, so that failures can be counted
    together: its first clause (`token F1 0.33 < 0.6` -> `token f1 # < #`, `empty answer`,
    `rubric panel`, `fail-to-pass #/#, pass-to-pass #/#`)."""
    head = reason.split(";")[0].split(":")[0]
    masked = re.sub(r"\b\d+(?:\.\d+)?\b", "#", head.lower())
    return " ".join(masked.split())[:FAILURE_CHARS] or "no reason given"


def first_failure(
    attempts: Sequence[Attempt], round_: int, policy: str, rubric: Sequence[str] = ()
) -> TargetRef | None:
    """The earliest of `attempts` that failed (no verdict is no failure), as the target a new
    task would name, with the task's `rubric` items (what a right answer meets, where review
    wrote some)."""
    failed = sorted((a for a in attempts if a.failed), key=lambda a: a.index)
    if not failed:
        return None
    attempt = failed[0]
    return TargetRef(
        round=round_,
        policy=policy,
        task_id=attempt.task_id,
        attempt_id=attempt.attempt_id,
        failure=failure_kind(attempt.reason),
        reason=attempt.reason,
        rubric=list(rubric),
    )


@dataclass(frozen=True)
class Steer:
    """Make a task from the steered one: a variant at the first of `levels` that can be made
    (`direction` set), or a sibling at its own level (`direction` None); `target` is the
    failure it answers, if any."""

    direction: Direction | None
    levels: list[Level]
    target: TargetRef | None


def steer(
    band: str,
    target: TargetRef | None,
    lineage: Lineage,
    ladder: Ladder | None,
    max_steps: int,
) -> Steer | Stop:
    """What to make from a train task the policy measured in `band`, `target` its first failed
    attempt (None: it failed none)."""
    if band in ("too_easy", "too_hard"):
        move = next_move(band, lineage, ladder, max_steps) if ladder else Stop("no_ladder")
        if isinstance(move, Move):
            return Steer(move.direction, move.levels, target if band == "too_hard" else None)
        if band == "too_easy" or target is None:
            return move
    elif band != "in_band":
        return Stop("no_band", band)
    if target is None:
        return Stop("no_failure")
    return Steer(None, [], target)
