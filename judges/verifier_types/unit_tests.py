"""`unit_tests`: the task's tests run on the attempt's edits in the sandbox, with the outside
check (`judges.unit_tests`, `data.runtime.code_grading`); the code family grades it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from data.export import Packaged, bundle_of
from data.lake import Task, UnitTestsSpec
from data.runtime.edits import EditError, Edits, parse_edits
from judges.verifier_types.base import VerifierType, spaced


def _edits(reply: str) -> Edits | None:
    try:
        return parse_edits(reply)
    except EditError:
        return None


def _is_gold(task: Task, attempt: str) -> bool:
    """The reference change itself: the same text, or the same edits written otherwise."""
    if spaced(attempt) == spaced(task.answer):
        return True
    edits = _edits(attempt)
    return edits is not None and edits == _edits(task.answer)


def _package_lacks(task: dict[str, Any], version: Path) -> str | None:
    """A code task is graded in the package only on the repository tree the version carries."""
    return None if bundle_of(version, task) else "code_without_workspace"


TYPE = VerifierType(
    "unit_tests",
    UnitTestsSpec,
    None,
    sandboxed=True,
    is_gold=_is_gold,
    packaged=Packaged("code", _package_lacks),
)
