"""`rubric`: the judge panel grades a reply against the task's rubric (`judges.rubric_grade`)."""

from __future__ import annotations

from data.records import RubricSpec
from judges.rubric_grade import rubric_grade
from judges.verifier_types.base import VerifierType

TYPE = VerifierType("rubric", RubricSpec, rubric_grade, judged=True)
