"""`rubric`: the judge panel grades a reply against the task's rubric (`judges.rubric_grade`)."""

from __future__ import annotations

from data.export import Packaged
from data.lake import Remedy, RubricSpec, Task
from judges.rubric_grade import rubric_grade
from judges.verifier_types.base import VerifierType, with_rubric


def _negatives(task: Task, passage: str) -> list[tuple[str, str]]:
    """The empty reply and every known negative (for a near-miss task, the failed production
    reply; for a report, the reference without its last passage's facts)."""
    known = [
        (f"negative {i} accepted", reply) for i, reply in enumerate(task.verifier.negatives, 1)
    ]
    return [("empty reply accepted", ""), *known]


def _tighter(spec: RubricSpec, closing: list[str]) -> list[tuple[Remedy, object]]:
    """The rubric with the items that close the hacks (none when it already has them)."""
    items = with_rubric(spec, closing)
    if items == spec.rubric:
        return []
    return [("rubric_items", spec.model_copy(update={"rubric": items}))]


TYPE = VerifierType(
    "rubric",
    RubricSpec,
    rubric_grade,
    judged=True,
    negatives=_negatives,
    gold_rejected="reference reply rejected",
    tighter=_tighter,
    must_refuse=("prompt injection",),
    packaged=Packaged(None, why_not="needs a judge model"),
)
