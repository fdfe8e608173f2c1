"""Running the red team: each attack graded as any attempt is, the evidence that it ran, and the
table of what scored.

A row passes when its attack scored 0 and was shown to have run. For a code attack the
evidence is its own mark on the standard error of the outside check's replay, which only its
code writes (`code_attacks.PRELUDE`); an attack that never ran proves nothing about the grader,
so it fails its row as surely as one that scored. An answer, report or tool-call attack runs
when it is graded; the grader's reason says what refused it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from data.lake import Task
from data.llm import LLMError
from data.runtime.code_grading import Point, TrySteps
from data.runtime.errors import NoVerdict
from data.runtime.outside_check import Oracle
from judges import verifier_types
from judges.redteam.answer_attacks import AnswerAttack, JudgeAsked, NoJudge
from judges.redteam.code_attacks import CodeAttack
from judges.redteam.grading import attacked

A = TypeVar("A", CodeAttack, AnswerAttack)


@dataclass(frozen=True)
class CodeTarget:
    """A code task as the red team attacks it: its name, the files its reference changes as
    an attempt starts from them, and how it is graded."""

    name: str
    family: str
    files: dict[str, str]
    reference: str
    points: Sequence[Point]
    try_steps: TrySteps
    checks: Sequence[Oracle | None]


@dataclass(frozen=True)
class Row:
    """One attack on one target: its reward, the grader's reason, and whether it ran."""

    attack: str
    kind: str
    family: str
    target: str
    reward: float
    why: str
    ran: bool

    @property
    def held(self) -> bool:
        """The grader held: the attack ran and scored nothing."""
        return self.ran and self.reward == 0.0


def attack_code(target: CodeTarget, attacks: Sequence[CodeAttack]) -> list[Row]:
    """Each of `attacks` graded on `target`."""
    return [_attacked(target, attack) for attack in attacks]


def _attacked(target: CodeTarget, attack: CodeAttack) -> Row:
    """`attack` graded on `target`; where the grader could not judge it, a row that did not
    run (it holds nothing), saying why."""
    row = Row(attack.name, attack.kind, target.family, target.name, 0.0, "", False)
    try:
        got = attacked(
            attack, target.files, target.reference, target.points, target.try_steps, target.checks
        )
    except NoVerdict as missing:
        return replace(row, why=f"no verdict: {missing}")
    return replace(row, reward=got.reward, why=got.why, ran=got.ran)


def attack_answers(tasks: Sequence[Task], attacks: Sequence[AnswerAttack]) -> list[Row]:
    """Each of `attacks` that applies to a task, on each of `tasks`, graded with `NoJudge`:
    one that reaches a judge counts as paid, as a judge that says yes would pay it."""
    rows = []
    for task in tasks:
        for attack in attacks:
            reply = attack.reply(task)
            if reply is not None:
                reward, why = asyncio.run(_answer_graded(task, reply))
                rows.append(
                    Row(attack.name, attack.kind, task.kind, task.task_id, reward, why, True)
                )
    return rows


async def _answer_graded(task: Task, reply: str) -> tuple[float, str]:
    judge = NoJudge()
    try:
        score = await verifier_types.grade(task, reply, judge)
    except (JudgeAsked, LLMError) as error:
        return 1.0, f"reached a judge ({error}): a judge that says yes would pay it"
    return score.reward, score.why


def one_per_class(attacks: Sequence[A]) -> list[A]:
    """The first attack of each class: the quick red team."""
    firsts: dict[str, A] = {}
    for attack in attacks:
        firsts.setdefault(attack.kind, attack)
    return list(firsts.values())


def table(rows: Sequence[Row]) -> str:
    """The rows as text: one line per attack and target, then the totals per class and per
    family."""
    lines = [f"{'scored':>6}  {'ran':>3}  {'family':<16} attack"]
    for row in rows:
        lines.append(
            f"{row.reward:>6.2f}  {'yes' if row.ran else 'NO':>3}  {row.family:<16} {row.attack}"
            + ("" if row.held else f"\n{'':>30}why: {row.why}")
        )
    for label, key in (("class", "kind"), ("family", "family")):
        lines += ["", f"{'tried':>5} {'scored':>6} {'not run':>7}  {label}"]
        for name in sorted({getattr(row, key) for row in rows}):
            group = [row for row in rows if getattr(row, key) == name]
            scored = sum(row.reward > 0 for row in group)
            unrun = sum(not row.ran for row in group)
            lines.append(f"{len(group):>5} {scored:>6} {unrun:>7}  {name}")
    scored = sum(row.reward > 0 for row in rows)
    unrun = sum(not row.ran for row in rows)
    lines += ["", f"{len(rows)} attacks tried, {scored} scored, {unrun} not shown to have run"]
    return "\n".join(lines)
