"""The rubric judge: does a free-form reply meet every rubric item of its task?

For tasks made from production traces, where many replies are right and none is the reference
word for word. The conversation, reference, rubric and reply sit in delimited blocks with angle
brackets escaped, so a reply cannot pose as instructions, and a reply with judge-directed
instructions in it (`judges.injection`) scores 0 without a judge being asked. The panel's
majority decides; a panel left undecided by errors raises instead of scoring.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from data.llm import LLMClient, LLMError
from data.prompts import chat_messages, escape, load_prompt
from data.records import Message, Task
from judges.consensus import decide, majority
from judges.injection import injection
from judges.panel import panel_votes
from judges.score import Score

SYSTEM = load_prompt(__file__, "rubric_grade_system")
USER = load_prompt(__file__, "rubric_grade_user")


class RubricVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    meets_all: StrictBool
    reason: str = Field(max_length=200)


def transcript(messages: list[Message]) -> str:
    """The non-system messages as `role: content` lines, escaped."""
    return "\n\n".join(f"{m.role}: {escape(m.content)}" for m in messages if m.role != "system")


def grading_messages(task: Task, attempt: str) -> list[dict[str, str]]:
    user = USER.render(
        conversation=transcript(task.prompt),
        reference=escape(task.answer),
        rubric="\n".join(f"{i}. {escape(item)}" for i, item in enumerate(task.verifier.rubric, 1)),
        attempt=escape(attempt),
    )
    return chat_messages(SYSTEM, user)


async def rubric_grade(task: Task, completion: str, llm: LLMClient) -> Score:
    """1.0 when the panel's majority finds every rubric item met, else 0.0."""
    if not completion.strip():
        return Score(0.0, "empty answer")
    if found := injection(completion):
        return Score(0.0, f"injection: {found}")
    votes = await panel_votes(
        llm,
        grading_messages(task, completion),
        RubricVerdict,
        lambda v: v.meets_all,
        lambda v: v.reason,
    )
    tally = decide([v.decision for v in votes], majority)
    if tally.outcome == "undecided":
        raise LLMError("judge_undecided", "; ".join(v.reason for v in votes))
    reasons = "; ".join(f"{v.judge}: {v.decision} ({v.reason})" for v in votes)
    return Score(1.0 if tally.outcome == "pass" else 0.0, f"rubric panel: {reasons}"[:300])
