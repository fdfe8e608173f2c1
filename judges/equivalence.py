"""The answer-equivalence judge: an LLM panel decides whether a free-form attempt means the gold.

Used by tasks whose verifier type is `llm_equivalence`, where exact match and token F1 are too
strict. A deterministic match is accepted without asking anyone. The question, gold answer and
attempt (and the task's rubric, if it has one) sit in separate delimited blocks, and angle
brackets inside them are escaped, so text in an attempt cannot close its block or pose as
instructions. Before the panel is asked, an attempt with judge-directed instructions in it
(`judges.injection`) scores 0, and so does one the matcher refuses whatever it means (several
candidate answers, the question repeated). With a rubric only an exact match skips the panel:
a token-F1 match must also be judged against the rubric items. The verdict must be a JSON
boolean: a reply such as "yes", "maybe" or both answers is rejected (repaired once, then an
error), and a panel left undecided by errors raises `JudgeUndecided` (no verdict) instead of
scoring 0 or 1, as does a panel whose every judge is below its control bar (`judges.panel.Held`)
where it would decide.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from data.lake import Task
from data.llm import LLMClient
from data.prompts import chat_messages, escape, load_prompt
from data.runtime.answer_match import refusal
from judges.consensus import decide, majority
from judges.injection import injection
from judges.panel import JudgeUndecided, panel_votes
from judges.rewards import Score, score

SYSTEM = load_prompt(__file__, "equivalence_system")
USER = load_prompt(__file__, "equivalence_user")
RUBRIC = load_prompt(__file__, "equivalence_rubric")


class EquivalenceVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    equivalent: StrictBool
    reason: str = Field(max_length=200)


def messages_for(
    question: str, gold: str, attempt: str, rubric: list[str] | tuple[str, ...] = ()
) -> list[dict[str, str]]:
    items = "\n".join(f"- {escape(item)}" for item in rubric)
    user = USER.render(
        question=escape(question),
        gold=escape(gold),
        rubric=RUBRIC.render(items=items) if rubric else "",
        attempt=escape(attempt),
    )
    return chat_messages(SYSTEM, user)


async def grade_equivalent(task: Task, completion: str, llm: LLMClient) -> Score:
    """Score `completion` for an `llm_equivalence` task: the deterministic match, else the
    judge panel (unless the attempt speaks to its judge or games the matcher). Raises
    `JudgeUndecided` (no verdict) rather than guess."""
    spec = task.verifier
    if found := injection(completion):
        return Score(0.0, f"injection: {found}")
    deterministic = score(spec, completion, task.answer, task.question)
    if deterministic.exact:
        return deterministic
    if deterministic.reward >= 1.0 and not spec.rubric:
        return deterministic
    if not completion.strip():
        return Score(0.0, "empty answer")
    refused = refusal(completion, task.answer, spec.context, task.question)
    if refused:
        return Score(0.0, refused)
    messages = messages_for(task.question, task.answer, completion, spec.rubric)
    votes = await panel_votes(
        llm, messages, EquivalenceVerdict, lambda v: v.equivalent, lambda v: v.reason
    )
    tally = decide([v.decision for v in votes], majority)
    if tally.outcome == "undecided":
        raise JudgeUndecided("; ".join(v.reason for v in votes))
    reasons = "; ".join(f"{v.judge}: {v.decision} ({v.reason})" for v in votes)
    return Score(1.0 if tally.outcome == "pass" else 0.0, f"equivalence panel: {reasons}"[:300])
