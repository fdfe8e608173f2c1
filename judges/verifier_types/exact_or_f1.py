"""`exact_or_f1`: the normalised exact match, else token F1 against the spec's threshold."""

from __future__ import annotations

from data.records import ExactOrF1Spec
from judges.equivalence import grade_answer
from judges.rewards import completion_text, question_of, score
from judges.verifier_types import answers
from judges.verifier_types.base import RewardRow, VerifierType


def _reward(row: RewardRow) -> float:
    return score(
        row.spec, completion_text(row.completion), row.gold, question_of(row.prompt)
    ).reward


TYPE = VerifierType(
    "exact_or_f1", ExactOrF1Spec, grade_answer, reward=_reward, negatives=answers.negatives
)
