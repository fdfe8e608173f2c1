"""Answerability: the judge panel must answer with the source and must not without it.

Open book: each judge gets the source chunk and the question; the majority must reach the gold
answer, scored by the task's own verifier. Closed book: the same question without the chunk; if
more than the configured share of the panel still answers correctly, the task leaks its answer
or is general knowledge, and is rejected.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from data.config import VerifyConfig
from data.llm import LLMClient
from data.prompts import Prompt, load_prompt
from data.records import Task, Verdict, content_id
from judges.rewards import score

OPEN_BOOK = load_prompt(__file__, "open_book")
CLOSED_BOOK = load_prompt(__file__, "closed_book")
MAX_ANSWER_TOKENS = 48


@dataclass(frozen=True)
class Decision:
    accepted: bool
    reason: str
    verdicts: list[Verdict]


def question_of(task: Task) -> str:
    return next(m.content for m in reversed(task.prompt) if m.role == "user")


async def _panel(
    task: Task,
    llm: LLMClient,
    check: Literal["open_book", "closed_book"],
    prompt: Prompt,
    values: dict[str, str],
) -> list[Verdict]:
    messages = [{"role": "user", "content": prompt.render(**values)}]
    replies = await asyncio.gather(
        *(llm.chat(role, messages, max_tokens=MAX_ANSWER_TOKENS) for role in llm.judge_roles)
    )
    verdicts = []
    for role, reply in zip(llm.judge_roles, replies, strict=True):
        result = score(task.verifier, reply.text, task.answer)
        verdicts.append(
            Verdict(
                verdict_id=content_id(task.task_id, check, role, llm.model(role), prompt.version),
                task_id=task.task_id,
                check=check,
                judge_model=llm.model(role),
                prompt_version=prompt.version,
                decision="pass" if result.reward >= 1.0 else "fail",
                reason=result.why,
                response=reply.text[:500],
                usage=reply.usage,
            )
        )
    return verdicts


def _passes(verdicts: list[Verdict]) -> int:
    return sum(v.decision == "pass" for v in verdicts)


async def judge(task: Task, passage: str, llm: LLMClient, config: VerifyConfig) -> Decision:
    """Run the open-book panel, then (if it passed) the closed-book leakage gate."""
    question = question_of(task)
    opened = await _panel(
        task, llm, "open_book", OPEN_BOOK, {"passage": passage, "question": question}
    )
    if _passes(opened) * 2 <= len(opened):
        return Decision(False, "not_answerable_with_source", opened)
    closed = await _panel(task, llm, "closed_book", CLOSED_BOOK, {"question": question})
    if _passes(closed) > config.closed_book_max_passes * len(closed):
        return Decision(False, "closed_book_leak", opened + closed)
    return Decision(True, "accepted", opened + closed)
