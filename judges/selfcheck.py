"""Verifier self-check: a task's verifier must accept its gold and reject what its type says it
must (`VerifierType.negatives`: an answer's perturbations, a rubric's negatives, near-miss
calls). A task that fails never leaves the lake."""

from __future__ import annotations

from data.lake import Task
from data.llm import LLMClient
from judges.verifier_types import grade, verifier_type


async def self_check(task: Task, llm: LLMClient, passage: str = "") -> str | None:
    """None if `task`'s verifier accepts its gold and rejects each negative its type names
    (`passage`: the text an answer task's answer is in); otherwise which check it failed.
    Raises TypeError for a type its family checks (code, world state)."""
    kind = verifier_type(task.verifier)
    if kind.negatives is None:
        raise TypeError(f"a {kind.name} verifier is self-checked by its family")
    if (await grade(task, task.answer, llm)).reward < 1.0:
        return kind.gold_rejected
    for accepted, attempt in kind.negatives(task, passage):
        if (await grade(task, attempt, llm)).reward >= 1.0:
            return accepted
    return None
