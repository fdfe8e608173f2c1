"""`llm_equivalence`: a deterministic match first, else the judge panel decides whether the
attempt means the gold (`judges.equivalence`)."""

from __future__ import annotations

from data.records import LLMEquivalenceSpec
from judges.equivalence import grade_answer
from judges.verifier_types import answers
from judges.verifier_types.base import VerifierType

TYPE = VerifierType(
    "llm_equivalence",
    LLMEquivalenceSpec,
    grade_answer,
    judged=True,
    negatives=answers.negatives,
)
