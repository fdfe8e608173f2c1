"""`exact_or_f1`: the normalised exact match, else token F1 against the spec's threshold."""

from __future__ import annotations

from data.lake import ExactOrF1Spec, Remedy, Task
from data.llm import LLMClient
from judges.rewards import completion_text, question_of, score
from judges.score import Score
from judges.verifier_types import answers
from judges.verifier_types.base import RewardRow, VerifierType


async def _grade(task: Task, completion: str, llm: LLMClient) -> Score:
    """The deterministic match alone: no judge is asked."""
    return score(task.verifier, completion, task.answer, task.question)


def _reward(row: RewardRow) -> float:
    return score(
        row.spec, completion_text(row.completion), row.gold, question_of(row.prompt)
    ).reward


def _tighter(spec: ExactOrF1Spec, closing: list[str]) -> list[tuple[Remedy, object]]:
    """Exact match only (where a token-F1 match is accepted), then the equivalence judge."""
    exact = [("exact_match_only", spec.model_copy(update={"f1_threshold": 1.0}))]
    return [*(exact if spec.f1_threshold < 1.0 else []), answers.equivalence_rubric(spec, closing)]


TYPE = VerifierType(
    "exact_or_f1",
    ExactOrF1Spec,
    _grade,
    reward=_reward,
    negatives=answers.negatives,
    is_gold=answers.is_gold,
    tighter=_tighter,
    must_refuse=("answer stuffing", "format tricks"),
    packaged=answers.PACKAGED,
)
