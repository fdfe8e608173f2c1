"""Answerability: the judge panel must answer with the source and must not without it.

Open book: each judge gets the source chunk and the question; its answer is scored by the task's
own verifier, and the panel's verdicts combine under the configured consensus rule. Closed book:
the same question without the chunk; unless a majority of the panel fails, the task leaks its
answer or is general knowledge, and is rejected. A judge that errors (after the client's retries)
casts no vote; when errors leave a decision open, the task is retried by a later run. What the
judges are asked for is a `Book`: a short answer (`ANSWERS`), or a short report drawing on
several passages (`REPORTS`, graded item by item against the task's rubric of facts).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from data.config import VerifyConfig
from data.llm import LLMClient, LLMError
from data.prompts import Prompt, load_prompt
from data.records import Consensus, Task, Usage, Verdict, content_id
from judges.consensus import Predicate, majority, rule_from
from judges.panel import consensus_record
from judges.verifier_types import grade

OPEN_BOOK = load_prompt(__file__, "open_book")
CLOSED_BOOK = load_prompt(__file__, "closed_book")
MAX_ANSWER_TOKENS = 48
LEAK_RULE = "leak unless a majority fails"

Check = Literal["open_book", "closed_book"]


@dataclass(frozen=True)
class Book:
    """What the panel is asked to write, with the source (`open`) and without it (`closed`),
    and how long its reply may be."""

    open: Prompt
    closed: Prompt
    max_tokens: int


ANSWERS = Book(OPEN_BOOK, CLOSED_BOOK, MAX_ANSWER_TOKENS)
REPORTS = Book(
    load_prompt(__file__, "report_open_book"), load_prompt(__file__, "report_closed_book"), 320
)


@dataclass(frozen=True)
class Decision:
    status: Literal["done", "rejected", "failed"]
    reason: str
    verdicts: list[Verdict]
    consensus: list[Consensus]


def leaks(votes: int, panel: int) -> bool:
    """The closed-book claim "the panel can answer without the source": no majority failed."""
    return 2 * votes >= panel and panel > 0


async def _ask(
    task: Task,
    llm: LLMClient,
    role: str,
    check: Check,
    prompt: Prompt,
    messages: list[dict[str, str]],
    max_tokens: int,
) -> Verdict:
    model = llm.model(role)
    common = {
        "verdict_id": content_id(task.task_id, check, role, model, prompt.version),
        "task_id": task.task_id,
        "check": check,
        "judge": role,
        "judge_model": model,
        "prompt_version": prompt.version,
        "confidence": None,
    }
    try:
        reply = await llm.chat(role, messages, max_tokens=max_tokens)
        result = await grade(task, reply.text, llm)
    except LLMError as error:
        return Verdict(
            **common, decision="error", reason=str(error)[:200], response="", usage=Usage()
        )
    return Verdict(
        **common,
        decision="pass" if result.reward >= 1.0 else "fail",
        reason=result.why,
        response=reply.text[:500],
        usage=reply.usage,
    )


async def _panel(
    task: Task,
    llm: LLMClient,
    check: Check,
    prompt: Prompt,
    values: dict[str, str],
    rule: tuple[str, Predicate],
    max_tokens: int = MAX_ANSWER_TOKENS,
) -> tuple[list[Verdict], Consensus]:
    messages = [{"role": "user", "content": prompt.render(**values)}]
    verdicts = list(
        await asyncio.gather(
            *(
                _ask(task, llm, role, check, prompt, messages, max_tokens)
                for role in llm.judge_roles
            )
        )
    )
    decisions = [v.decision for v in verdicts]
    return verdicts, consensus_record(task.task_id, check, decisions, rule)


async def open_book_verdicts(task: Task, passage: str, llm: LLMClient) -> list[Verdict]:
    """Each judge's open-book verdict on `task`, without a consensus."""
    values = {"passage": passage, "question": task.question}
    verdicts, _ = await _panel(task, llm, "open_book", OPEN_BOOK, values, ("majority", majority))
    return verdicts


async def judge(
    task: Task, passage: str, llm: LLMClient, config: VerifyConfig, book: Book = ANSWERS
) -> Decision:
    """Run the open-book panel, then (if it passed) the closed-book leakage gate."""
    question = task.question
    opened, open_consensus = await _panel(
        task,
        llm,
        "open_book",
        book.open,
        {"passage": passage, "question": question},
        rule_from(config),
        book.max_tokens,
    )
    if open_consensus.decision == "undecided":
        return Decision("failed", "judge_error", opened, [open_consensus])
    if open_consensus.decision == "fail":
        return Decision("rejected", "not_answerable_with_source", opened, [open_consensus])
    closed, closed_consensus = await _panel(
        task,
        llm,
        "closed_book",
        book.closed,
        {"question": question},
        (LEAK_RULE, leaks),
        book.max_tokens,
    )
    verdicts, consensus = opened + closed, [open_consensus, closed_consensus]
    if closed_consensus.decision == "undecided":
        return Decision("failed", "judge_error", verdicts, consensus)
    if closed_consensus.decision == "pass":
        return Decision("rejected", "closed_book_leak", verdicts, consensus)
    return Decision("done", "accepted", verdicts, consensus)
