"""The rubric judge: does a free-form reply meet every rubric item of its task?

For tasks made from production traces, where many replies are right and none is the reference
word for word, and for document reports (`by_item` rubrics, one item per checkable fact). The
conversation, reference, rubric and reply sit in delimited blocks with angle brackets escaped,
so a reply cannot pose as instructions, and a reply with judge-directed instructions in it
(`judges.injection`) scores 0 without a judge being asked. The panel's majority decides: on
the whole rubric at once, or, for a `by_item` rubric, on each item (every judge answers for
all items in one reply; an item is met when a majority says so, and the reward is the share
met, a pass only when every item is). A panel left undecided by errors raises `JudgeUndecided`
(no verdict) instead of scoring, and so does a panel whose every judge is below its control
bar (`judges.panel.Held`).
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, StrictBool, create_model

from data.lake import Message, Task
from data.llm import LLMClient, LLMError
from data.prompts import chat_messages, escape, load_prompt
from judges.consensus import Tally, decide, majority
from judges.injection import injection
from judges.panel import JudgeUndecided, deciding_roles, panel_votes
from judges.score import Score

SYSTEM = load_prompt(__file__, "rubric_grade_system")
USER = load_prompt(__file__, "rubric_grade_user")
ITEMS_SYSTEM = load_prompt(__file__, "rubric_items_system")
ITEMS_USER = load_prompt(__file__, "rubric_items_user")


class RubricVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    meets_all: StrictBool
    reason: str = Field(max_length=200)


def transcript(messages: list[Message]) -> str:
    """The non-system messages as `role: content` lines, escaped."""
    return "\n\n".join(f"{m.role}: {escape(m.content)}" for m in messages if m.role != "system")


def numbered(items: list[str]) -> str:
    """Rubric items one a line, numbered from 1, escaped."""
    return "\n".join(f"{i}. {escape(item)}" for i, item in enumerate(items, 1))


def grading_messages(task: Task, attempt: str) -> list[dict[str, str]]:
    user = USER.render(
        conversation=transcript(task.prompt),
        reference=escape(task.answer),
        rubric=numbered(task.verifier.rubric),
        attempt=escape(attempt),
    )
    return chat_messages(SYSTEM, user)


def item_messages(task: Task, attempt: str) -> list[dict[str, str]]:
    """The item-by-item judge's conversation about `attempt`."""
    items = task.verifier.rubric
    user = ITEMS_USER.render(
        conversation=transcript(task.prompt),
        reference=escape(task.answer),
        rubric=numbered(items),
        attempt=escape(attempt),
        count=str(len(items)),
    )
    return chat_messages(ITEMS_SYSTEM, user)


@functools.cache
def _items_verdict(count: int) -> type[BaseModel]:
    """The item judge's reply schema: exactly one boolean per rubric item."""
    return create_model(
        "ItemsVerdict",
        __config__=ConfigDict(extra="forbid"),
        met=(list[StrictBool], Field(min_length=count, max_length=count)),
        reason=(str, Field(max_length=200)),
    )


@dataclass(frozen=True)
class ItemVotes:
    """One judge's votes on every rubric item (all "error" when it gave no usable reply)."""

    judge: str
    decisions: list[str]  # per item: "pass", "fail" or "error"
    reason: str


async def item_votes(task: Task, completion: str, llm: LLMClient) -> list[ItemVotes]:
    """Each judge's item-by-item votes on `completion` (raises `judges.panel.Held` where every
    judge is below its control bar)."""
    count = len(task.verifier.rubric)
    messages = item_messages(task, completion)

    async def vote(role: str) -> ItemVotes:
        try:
            verdict = await llm.structured(
                role, messages, _items_verdict(count), max_tokens=60 + 8 * count, repairs=1
            )
        except LLMError as error:
            return ItemVotes(role, ["error"] * count, str(error)[:200])
        return ItemVotes(role, ["pass" if m else "fail" for m in verdict.met], verdict.reason)

    return list(await asyncio.gather(*(vote(role) for role in deciding_roles(llm))))


async def item_tallies(task: Task, completion: str, llm: LLMClient) -> list[Tally]:
    """The panel's majority on each rubric item of `task` for `completion`; raises
    `JudgeUndecided` (no verdict) when errors leave any item open."""
    votes = await item_votes(task, completion, llm)
    tallies = [
        decide([v.decisions[i] for v in votes], majority) for i in range(len(task.verifier.rubric))
    ]
    if any(t.outcome == "undecided" for t in tallies):
        raise JudgeUndecided("; ".join(f"{v.judge}: {v.reason}" for v in votes))
    return tallies


async def _grade_items(task: Task, completion: str, llm: LLMClient) -> Score:
    tallies = await item_tallies(task, completion, llm)
    missed = [str(i) for i, t in enumerate(tallies, 1) if t.outcome == "fail"]
    met = len(tallies) - len(missed)
    why = f"rubric items met: {met} of {len(tallies)}"
    if missed:
        why += f" (missed {', '.join(missed)})"
    return Score(met / len(tallies) if tallies else 0.0, why)


async def rubric_grade(task: Task, completion: str, llm: LLMClient) -> Score:
    """1.0 when the panel's majority finds every rubric item met, else 0.0; a `by_item` rubric
    scores the share of its items met (1.0: all of them)."""
    if not completion.strip():
        return Score(0.0, "empty answer")
    if found := injection(completion):
        return Score(0.0, f"injection: {found}")
    if task.verifier.by_item:
        return await _grade_items(task, completion, llm)
    votes = await panel_votes(
        llm,
        grading_messages(task, completion),
        RubricVerdict,
        lambda v: v.meets_all,
        lambda v: v.reason,
    )
    tally = decide([v.decision for v in votes], majority)
    if tally.outcome == "undecided":
        raise JudgeUndecided("; ".join(v.reason for v in votes))
    reasons = "; ".join(f"{v.judge}: {v.decision} ({v.reason})" for v in votes)
    return Score(1.0 if tally.outcome == "pass" else 0.0, f"rubric panel: {reasons}"[:300])
