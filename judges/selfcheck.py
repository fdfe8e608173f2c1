"""Verifier self-check: a task's verifier must accept its gold answer and reject perturbed ones.

Perturbations: the empty answer, the answer with its last number off by one, and a wrong entity
of the same kind taken from the source passage. A task that fails never leaves the lake.
"""

from __future__ import annotations

import re

from data.answer_match import normalize_answer
from data.llm import LLMClient
from data.records import Task
from data.spans import answer_candidates
from judges import tool_calls
from judges.verifier_types import grade

_LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)")


def off_by_one(answer: str) -> str | None:
    """The answer with its last run of digits increased by one ("2,200" -> "2,201")."""
    match = _LAST_NUMBER.search(answer)
    if match is None:
        return None
    bumped = str(int(match.group(1)) + 1).zfill(len(match.group(1)))
    return answer[: match.start()] + bumped + answer[match.end() :]


def wrong_entity(answer: str, passage: str) -> str | None:
    """Another span of the passage of the same kind (number or name) as the answer."""
    numeric = any(c.isdigit() for c in answer)
    gold = normalize_answer(answer)
    for span in answer_candidates(passage):
        other = normalize_answer(span)
        same_kind = any(c.isdigit() for c in span) == numeric
        if same_kind and other and other not in gold and gold not in other:
            return span
    return None


def perturbations(answer: str, passage: str) -> list[tuple[str, str]]:
    found = [
        ("empty", ""),
        ("off_by_one", off_by_one(answer)),
        ("wrong_entity", wrong_entity(answer, passage)),
    ]
    return [(name, text) for name, text in found if text is not None]


async def self_check(task: Task, passage: str, llm: LLMClient) -> str | None:
    """None if the verifier behaves; otherwise which check it failed."""
    if (await grade(task, task.answer, llm)).reward < 1.0:
        return "gold answer rejected"
    for name, text in perturbations(task.answer, passage):
        if (await grade(task, text, llm)).reward >= 1.0:
            return f"{name} perturbation {text!r} accepted"
    return None


async def trace_self_check(task: Task, llm: LLMClient) -> str | None:
    """The self-check of a task made from a trace (or of a document report): a tool-replay
    verifier must accept the observed calls and reject near misses
    (`judges.tool_calls.self_check`); a rubric verifier must accept the reference reply and
    reject the empty reply and every known negative (for a near-miss task, the failed
    production reply; for a report, the reference without its last passage's facts)."""
    if task.verifier.type == "tool_calls":
        return tool_calls.self_check(task)
    if (await grade(task, task.answer, llm)).reward < 1.0:
        return "reference reply rejected"
    for index, negative in enumerate(["", *task.verifier.negatives]):
        if (await grade(task, negative, llm)).reward >= 1.0:
            return "empty reply accepted" if index == 0 else f"negative {index} accepted"
    return None
