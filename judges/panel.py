"""Asking the judge panel one structured question: every judge votes, errors included.

A judge below its control bar decides nothing (`judges.controls`): the stage runner leaves it
off a panel where another judge passed its controls, and where none did it marks every judge
(`Endpoint.below_bar`). A check such a panel would decide is then held, in every family, by one
error (`Held`: the item `failed`, `held_judge_below_controls`, taken again by a later run):
`deciding_roles` raises it before any judge is asked. A panel its judges' errors leave
undecided on an attempt's grade raises `JudgeUndecided`: no verdict, never a 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from data.lake import Consensus, Usage, Verdict, content_id
from data.llm import LLMClient, LLMError
from data.runtime.errors import NoVerdict, ReasonedError
from judges.consensus import Predicate, decide

V = TypeVar("V", bound=BaseModel)
HELD = "held_judge_below_controls"
HELD_DETAIL = (
    "every judge failed its control items: its verdict would decide alone; held until a run"
    " whose judges pass their controls (a stronger judge model) decides"
)


class Held(ReasonedError):
    """A check that only judges below their control bar could decide: the item waits."""

    def __init__(self) -> None:
        super().__init__(HELD, HELD_DETAIL)


class JudgeUndecided(LLMError, NoVerdict):
    """A grade the panel could not give: its judges' errors (a server down, replies that are no
    verdict) left it undecided. An LLM failure, and no verdict on the attempt graded."""

    def __init__(self, detail: str) -> None:
        super().__init__("judge_undecided", detail)


def below_bar(llm: LLMClient) -> bool:
    """Whether every judge `llm` asks failed its control items (`Endpoint.below_bar`)."""
    roles = llm.judge_roles
    return bool(roles) and all(llm.endpoint(role).below_bar for role in roles)


def deciding_roles(llm: LLMClient) -> list[str]:
    """The judges whose votes decide a check; raises `Held` where all are below the bar."""
    if below_bar(llm):
        raise Held()
    return llm.judge_roles


@dataclass(frozen=True)
class JudgeVote:
    judge: str
    decision: str  # "pass", "fail" or "error"
    reason: str


async def panel_votes(
    llm: LLMClient,
    messages: list[dict[str, str]],
    schema: type[V],
    passed: Callable[[V], bool],
    reason: Callable[[V], str],
    max_tokens: int = 120,
) -> list[JudgeVote]:
    """Each judge's vote on `messages`: its reply parsed into `schema` (repaired once), then
    `passed` decides pass or fail; a judge without a usable reply votes "error". Raises
    `Held` where every judge is below its control bar."""

    async def vote(role: str) -> JudgeVote:
        try:
            verdict = await llm.structured(role, messages, schema, max_tokens=max_tokens, repairs=1)
        except LLMError as error:
            return JudgeVote(role, "error", str(error)[:200])
        return JudgeVote(role, "pass" if passed(verdict) else "fail", reason(verdict))

    return list(await asyncio.gather(*(vote(role) for role in deciding_roles(llm))))


def refused_votes(llm: LLMClient, reason: str) -> list[JudgeVote]:
    """Every judge's vote on text refused before any judge reads it (`judges.injection`): a
    fail for `reason`, no judge asked."""
    return [JudgeVote(role, "fail", reason) for role in llm.judge_roles]


def panel_records(
    subject_id: str,
    check: str,
    votes: list[JudgeVote],
    llm: LLMClient,
    prompt_version: str,
    rule: tuple[str, Predicate],
) -> tuple[list[Verdict], Consensus]:
    """The votes on one check of `subject_id` (a task, or a trace) as lake records: each
    judge's verdict, and their consensus under `rule`."""
    verdicts = [
        Verdict(
            verdict_id=content_id(subject_id, check, v.judge, llm.model(v.judge), prompt_version),
            task_id=subject_id,
            check=check,
            judge=v.judge,
            judge_model=llm.model(v.judge),
            prompt_version=prompt_version,
            decision=v.decision,
            confidence=None,
            reason=v.reason,
            response="",
            usage=Usage(),
        )
        for v in votes
    ]
    return verdicts, consensus_record(subject_id, check, [v.decision for v in votes], rule)


def consensus_record(
    subject_id: str, check: str, decisions: list[str], rule: tuple[str, Predicate]
) -> Consensus:
    """The panel's decisions on one check of `subject_id`, combined under `rule`."""
    name, holds = rule
    tally = decide(decisions, holds)
    return Consensus(
        task_id=subject_id,
        check=check,
        rule=name,
        decision=tally.outcome,
        passes=tally.passes,
        fails=tally.fails,
        errors=tally.errors,
        agreement=tally.agreement,
    )
