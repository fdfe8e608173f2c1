"""An attack graded as any attempt is, and the evidence that its code ran: its mark on the
standard error of the outside check's replay (`code_attacks.MARK`), which only its code writes.
Used by `foundry redteam` (`judges.redteam.run`) and by the admission's red-team gate
(`judges.unit_tests`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from data.runtime.code_grading import Point, TrySteps, grade
from data.runtime.outside_check import Oracle
from data.runtime.trial import Step, Trial
from judges.redteam.code_attacks import MARK, CodeAttack


@dataclass(frozen=True)
class Attacked:
    """An attack graded: its reward, the grader's reason, and whether its code was seen to run
    (its mark on the standard error of the outside check's replay)."""

    reward: float
    why: str
    ran: bool


def attacked(
    attack: CodeAttack,
    files: dict[str, str],
    reference: str,
    points: Sequence[Point],
    try_steps: TrySteps,
    checks: Sequence[Oracle | None],
    until_decided: bool = False,
) -> Attacked:
    """`attack` on a task whose reference change is `reference` and whose files start as
    `files`, graded as any attempt is (`until_decided`: its tests run only where the outside
    check does not already score it 0)."""
    trials: list[Trial] = []

    def watched(steps: list[Step]) -> list[Trial]:
        made = try_steps(steps)
        trials.extend(made)
        return made

    reward, why = grade(attack.reply(files), reference, points, watched, checks, until_decided)
    ran = any(t.replayed is not None and MARK in t.replayed.stderr for t in trials)
    return Attacked(reward, why, ran)


def as_first_step(attack: CodeAttack) -> CodeAttack:
    """`attack` made as the first step of a commit sequence's reply (the later steps empty)."""
    return CodeAttack(attack.name, attack.kind, lambda files: f"## Step 1\n{attack.reply(files)}")
