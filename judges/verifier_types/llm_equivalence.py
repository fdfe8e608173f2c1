"""`llm_equivalence`: a deterministic match first, else the judge panel decides whether the
attempt means the gold (`judges.equivalence`)."""

from __future__ import annotations

from data.lake import LLMEquivalenceSpec, Remedy
from judges.equivalence import grade_equivalent
from judges.verifier_types import answers
from judges.verifier_types.base import VerifierType


def _tighter(spec: LLMEquivalenceSpec, closing: list[str]) -> list[tuple[Remedy, object]]:
    """The judge holding a longer rubric (none when the rubric already has every item)."""
    step = answers.equivalence_rubric(spec, closing)
    return [step] if step[1].rubric != spec.rubric else []


TYPE = VerifierType(
    "llm_equivalence",
    LLMEquivalenceSpec,
    grade_equivalent,
    judged=True,
    negatives=answers.negatives,
    is_gold=answers.is_gold,
    tighter=_tighter,
    must_refuse=("answer stuffing", "format tricks", "prompt injection"),
    packaged=answers.PACKAGED,
)
