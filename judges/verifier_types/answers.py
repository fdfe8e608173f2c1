"""What the answer types (`exact_or_f1`, `llm_equivalence`) share: what their self-check must
reject (the empty answer, the answer with its last number off by one, a wrong entity of the same
kind taken from the source passage), which attempts are the gold itself, and the remedy step
both end their ladder with."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from data.documents import answer_candidates
from data.export import Packaged
from data.lake import AnswerSpec, LLMEquivalenceSpec, Remedy, Task
from data.runtime.answer_match import normalize_answer
from judges.rewards import score
from judges.verifier_types.base import with_rubric

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


def negatives(task: Task, passage: str) -> list[tuple[str, str]]:
    """The perturbations of `task`'s answer, each with the words for its acceptance."""
    found = perturbations(task.answer, passage)
    return [(f"{name} perturbation {text!r} accepted", text) for name, text in found]


def is_gold(task: Task, attempt: str) -> bool:
    """Whether `attempt` gives the gold answer exactly (after normalisation)."""
    return score(task.verifier, attempt, task.answer).exact


def equivalence_rubric(spec: AnswerSpec, closing: list[str]) -> tuple[Remedy, AnswerSpec]:
    """The last step of an answer remedy: the equivalence judge, holding the rubric."""
    tighter = LLMEquivalenceSpec(
        f1_threshold=spec.f1_threshold, context=spec.context, rubric=with_rubric(spec, closing)
    )
    return "equivalence_rubric", tighter


def _package_lacks(task: dict[str, Any], version: Path) -> str | None:
    """What an answer task lacks to be graded in the exported package: a gold answer (what
    its environment needs, the corpus for a search task, is the environment's to say)."""
    return None if normalize_answer(task["answer"]) else "empty_answer"


# the exact/F1 matcher (an `llm_equivalence` task by that path alone, which only ever rejects
# more: the gold still scores 1)
PACKAGED = Packaged("answer", _package_lacks)
