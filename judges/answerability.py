"""Answerability: the judge panel must answer with the source and must not without it.

Open book: each judge gets the source chunk and the question; its answer is scored by the task's
own verifier, and the panel's verdicts combine under the configured consensus rule. Closed book:
the same question without the chunk; unless a majority of the panel fails, the task leaks its
answer or is general knowledge, and is rejected. A judge that errors (after the client's retries)
casts no vote; when errors leave a decision open, the task is retried by a later run. What the
judges are asked for is a `Book`: a short answer (`ANSWERS`), or a short report drawing on
several passages (`REPORTS`, graded item by item against the task's rubric of facts).

A panel whose every judge failed its control items (`judges.panel.below_bar`) does not decide.
Where the source answers the task by construction (a fill-in-the-blank of a sentence the passage
holds verbatim, the blank being the answer: the family says so), the open-book panel is not
asked and only the closed-book gate is, which can only reject; any other task is held as every
check of such a panel is (`judges.panel.Held`: `failed`, `held_judge_below_controls`), and a
later run whose judges pass their controls decides it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from data.config import VerifyConfig
from data.lake import Consensus, Task, Usage, Verdict, content_id
from data.llm import LLMClient, LLMError
from data.prompts import Prompt, load_prompt
from judges.consensus import Predicate, majority, rule_from
from judges.panel import Held, below_bar, consensus_record
from judges.verifier_types import grade

OPEN_BOOK = load_prompt(__file__, "open_book")
CLOSED_BOOK = load_prompt(__file__, "closed_book")
MAX_ANSWER_TOKENS = 48
LEAK_RULE = "leak unless a majority fails"
BY_CONSTRUCTION = (
    "accepted_by_construction",
    "every judge failed its control items; the source answers this question by construction"
    " (the blank of a sentence it holds verbatim), and the closed-book gate passed",
)

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
    detail: str = ""


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
    task: Task,
    passage: str,
    llm: LLMClient,
    config: VerifyConfig,
    book: Book = ANSWERS,
    *,
    answered_by_source: bool = False,
) -> Decision:
    """Run the open-book panel, then (if it passed) the closed-book leakage gate. With a panel
    below the bar (every judge below its controls), a task `answered_by_source` (by
    construction) meets only the closed-book gate, and any other is held (raises `Held`)."""
    if below_bar(llm) and not answered_by_source:
        raise Held()
    if below_bar(llm):
        return await _closed_book_gate(task, llm, book, [], [], BY_CONSTRUCTION)
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
    return await _closed_book_gate(task, llm, book, opened, [open_consensus], ("accepted", ""))


async def _closed_book_gate(
    task: Task,
    llm: LLMClient,
    book: Book,
    opened: list[Verdict],
    open_consensus: list[Consensus],
    accepted: tuple[str, str],
) -> Decision:
    """The panel without the source: a task it can answer is rejected as a leak."""
    closed, closed_consensus = await _panel(
        task,
        llm,
        "closed_book",
        book.closed,
        {"question": task.question},
        (LEAK_RULE, leaks),
        book.max_tokens,
    )
    verdicts, consensus = opened + closed, [*open_consensus, closed_consensus]
    if closed_consensus.decision == "undecided":
        return Decision("failed", "judge_error", verdicts, consensus)
    if closed_consensus.decision == "pass":
        return Decision("rejected", "closed_book_leak", verdicts, consensus)
    reason, detail = accepted
    return Decision("done", reason, verdicts, consensus, detail)
