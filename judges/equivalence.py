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
error), and a panel left undecided by errors raises instead of scoring 0 or 1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from data.answer_match import refusal
from data.endpoints import Endpoint
from data.llm import LLMClient, LLMError
from data.llm_cache import ResponseCache
from data.prompts import chat_messages, escape, load_prompt
from data.records import AnswerSpec, LLMEquivalenceSpec, RubricSpec, Task, ToolCallsSpec
from judges import tool_calls
from judges.consensus import decide, majority
from judges.injection import injection
from judges.panel import panel_votes
from judges.rewards import Score, columns_of, completion_text, score, trainer_task
from judges.rubric_grade import rubric_grade

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


async def grade(task: Task, completion: str, llm: LLMClient) -> Score:
    """Score `completion` for `task`; `llm_equivalence` tasks ask the judge panel when the
    deterministic match fails (unless the attempt speaks to its judge or games the matcher);
    `rubric` tasks are graded by the panel against their rubric, `tool_calls` tasks by their
    calls. Raises LLMError("judge_undecided") rather than guess."""
    spec = task.verifier
    if isinstance(spec, RubricSpec):
        return await rubric_grade(task, completion, llm)
    if isinstance(spec, ToolCallsSpec):
        return tool_calls.grade(spec, completion)
    if not isinstance(spec, AnswerSpec):
        raise TypeError(f"a {spec.type} verifier is graded by its family")
    if isinstance(spec, LLMEquivalenceSpec) and (found := injection(completion)):
        return Score(0.0, f"injection: {found}")
    deterministic = score(spec, completion, task.answer, task.question)
    if not isinstance(spec, LLMEquivalenceSpec) or deterministic.exact:
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
        raise LLMError("judge_undecided", "; ".join(v.reason for v in votes))
    reasons = "; ".join(f"{v.judge}: {v.decision} ({v.reason})" for v in votes)
    return Score(1.0 if tally.outcome == "pass" else 0.0, f"equivalence panel: {reasons}"[:300])


def judge_reward(
    endpoints: dict[str, Endpoint], cache: ResponseCache | None = None
) -> Callable[..., list[float | None]]:
    """A TRL reward function for the verifier types a judge decides (`llm_equivalence`,
    `rubric`): each completion is graded as calibration grades it, by the judge panel at
    `endpoints` (as `data.endpoints` resolves them). Other types, and completions the panel
    leaves undecided, get None. It reads the same columns as `judges.rewards.verifier_reward`."""

    def reward(
        prompts: list[Any],
        completions: list[Any],
        verifier: list[str | dict[str, Any]],
        solution: list[str] | None = None,
        answer: list[str] | None = None,
        **columns: Any,
    ) -> list[float | None]:
        specs, golds = columns_of(verifier, solution, answer)

        async def one(llm: LLMClient, prompt: Any, completion: Any, spec, gold) -> float | None:
            if not isinstance(spec, LLMEquivalenceSpec | RubricSpec):
                return None
            task = trainer_task(prompt, gold, spec)
            try:
                return (await grade(task, completion_text(completion), llm)).reward
            except LLMError:
                return None

        async def run() -> list[float | None]:
            llm = LLMClient(endpoints, cache, run_id="trainer")
            try:
                batch = zip(prompts, completions, specs, golds, strict=True)
                return list(await asyncio.gather(*(one(llm, *row) for row in batch)))
            finally:
                await llm.aclose()

        return asyncio.run(run())

    return reward
