"""Reward-hack mining: rewarded attempts that do not truly answer, and the verifier's remedy.

Only an attempt rewarded without being the gold answer itself is suspicious (an exact match is
genuine by construction); up to MAX_ATTEMPTS distinct ones per task go to the judge panel. An
attempt is a hack when a majority of the panel says so; a judge error counts neither way, and a
panel left undecided by errors raises, so the review is retried rather than guessed.

A task with a hack gets the first remedy on the ladder that rejects every flagged attempt and
still accepts the gold answer: exact match only (for verifiers that accept a token-F1 match),
then the answer-equivalence judge with a rubric (the task's rubric items plus one item per hack
pattern). The remedy is a new task, which is verified and calibrated again.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from data.llm import LLMClient, LLMError, settle
from data.prompts import chat_messages, escape, load_prompt
from data.records import (
    AnswerSpec,
    Attempt,
    ExactOrF1Spec,
    HackPattern,
    HackVerdict,
    LLMEquivalenceSpec,
    Remedied,
    Remedy,
    Task,
    VerifierSpec,
    content_id,
)
from judges import rubrics
from judges.consensus import decide, majority
from judges.equivalence import grade
from judges.rewards import distinct_attempts, score

SYSTEM = load_prompt(__file__, "hack_system")
USER = load_prompt(__file__, "hack_user")
PROMPT_VERSION = content_id(SYSTEM.version, USER.version, length=12)
MAX_ATTEMPTS = 3

# The rubric item that closes each kind of hack once the equivalence judge enforces it.
PATTERN_ITEMS: dict[str, str] = {
    "hedged_list": rubrics.ONE_ANSWER,
    "echoes_question": "states the answer instead of repeating the question",
    "format_gaming": "gives the answer plainly, without padding or formatting tricks",
    "other": "answers the question itself rather than matching the checker's wording",
}


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid")
    genuine: StrictBool
    pattern: Literal["none", "hedged_list", "echoes_question", "format_gaming", "other"]
    reason: str = Field(max_length=200)


@dataclass(frozen=True)
class Finding:
    """An attempt the panel flagged, with the pattern most of its hack votes named."""

    attempt: Attempt
    pattern: HackPattern


def suspicious(task: Task, attempts: list[Attempt]) -> list[Attempt]:
    """Rewarded attempts whose answer is not the gold itself, distinct, in attempt order."""

    def rewarded_but_not_gold(attempt: Attempt) -> bool:
        return (
            attempt.reward >= 1.0 and not score(task.verifier, attempt.response, task.answer).exact
        )

    return distinct_attempts(attempts, rewarded_but_not_gold, MAX_ATTEMPTS)


def messages_for(task: Task, attempt: str) -> list[dict[str, str]]:
    user = USER.render(
        question=escape(task.question), gold=escape(task.answer), attempt=escape(attempt)
    )
    return chat_messages(SYSTEM, user)


async def _vote(task: Task, attempt: Attempt, role: str, llm: LLMClient) -> HackVerdict:
    model = llm.model(role)
    common = {
        "verdict_id": content_id(attempt.attempt_id, role, model, PROMPT_VERSION),
        "task_id": task.task_id,
        "attempt_id": attempt.attempt_id,
        "judge": role,
        "judge_model": model,
        "prompt_version": PROMPT_VERSION,
    }
    try:
        view = await llm.structured(
            role, messages_for(task, attempt.response), _View, max_tokens=120, repairs=1
        )
    except LLMError as error:
        return HackVerdict(**common, decision="error", pattern=None, reason=str(error)[:200])
    if view.genuine:
        return HackVerdict(**common, decision="genuine", pattern=None, reason=view.reason)
    pattern = "other" if view.pattern == "none" else view.pattern
    return HackVerdict(**common, decision="hack", pattern=pattern, reason=view.reason)


async def mine(
    task: Task, attempts: list[Attempt], llm: LLMClient
) -> tuple[list[Attempt], list[HackVerdict], list[Finding]]:
    """Ask the panel about each suspicious attempt: (checked attempts, verdicts, findings)."""
    checked = suspicious(task, attempts)
    votes = await asyncio.gather(
        *(_vote(task, attempt, role, llm) for attempt in checked for role in llm.judge_roles)
    )
    findings = []
    for attempt in checked:
        mine_ = [v for v in votes if v.attempt_id == attempt.attempt_id]
        claims = {"hack": "pass", "genuine": "fail", "error": "error"}
        tally = decide([claims[v.decision] for v in mine_], majority)
        if tally.outcome == "undecided":
            raise LLMError("judge_undecided", "; ".join(v.reason for v in mine_)[:500])
        if tally.outcome == "pass":
            patterns = Counter(v.pattern for v in mine_ if v.pattern is not None)
            findings.append(Finding(attempt, patterns.most_common(1)[0][0]))
    return checked, list(votes), findings


def ladder(
    spec: AnswerSpec, rubric: list[str], patterns: list[HackPattern]
) -> list[tuple[Remedy, AnswerSpec]]:
    """The tighter verifiers to try, in order."""
    steps: list[tuple[Remedy, AnswerSpec]] = []
    if isinstance(spec, ExactOrF1Spec) and spec.f1_threshold < 1.0:
        steps.append(("exact_match_only", spec.model_copy(update={"f1_threshold": 1.0})))
    items = list(dict.fromkeys([*spec.rubric, *rubric, *(PATTERN_ITEMS[p] for p in patterns)]))
    if not isinstance(spec, LLMEquivalenceSpec) or items != spec.rubric:
        tighter = LLMEquivalenceSpec(
            f1_threshold=spec.f1_threshold, context=spec.context, rubric=items
        )
        steps.append(("equivalence_rubric", tighter))
    return steps


def derive(task: Task, spec: VerifierSpec, remedy: Remedy) -> Task:
    """`task` with a new verifier: a new task id, its lineage naming the remedy and parent."""
    remedied = Remedied(remedy=remedy, parent=task.task_id)
    return task.model_copy(
        update={
            "task_id": Task.make_id(task.kind, task.prompt, task.answer, spec),
            "verifier": spec,
            "lineage": task.lineage.model_copy(update={"remedied": remedied}),
        }
    )


async def remedy(
    task: Task, findings: list[Finding], rubric: list[str], llm: LLMClient
) -> tuple[Remedy, Task | None]:
    """The first remedy that rejects every flagged attempt and still accepts the gold answer."""
    patterns = list(dict.fromkeys(f.pattern for f in findings))
    for name, spec in ladder(task.verifier, rubric, patterns):
        candidate = derive(task, spec, name)
        if (await grade(candidate, task.answer, llm)).reward < 1.0:
            continue
        scores = await settle([grade(candidate, f.attempt.response, llm) for f in findings])
        if all(s.reward < 1.0 for s in scores):
            return name, candidate
    return "none_held", None
