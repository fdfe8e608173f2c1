"""The verifier types, one module each, and how the rest of the code finds them: by the type
of a task's verifier spec (`verifier_type`), never by branching on it. A new type is its spec
in `data/lake/records/specs.py`, a module here and a line in `REGISTERED`."""

from __future__ import annotations

from data.export import Packaged
from data.lake import Task
from data.llm import LLMClient
from judges.score import Score
from judges.verifier_types import (
    exact_or_f1,
    llm_equivalence,
    rubric,
    tool_calls,
    unit_tests,
    world_state,
)
from judges.verifier_types.base import VerifierType

REGISTERED: list[VerifierType] = [
    exact_or_f1.TYPE,
    llm_equivalence.TYPE,
    rubric.TYPE,
    unit_tests.TYPE,
    tool_calls.TYPE,
    world_state.TYPE,
]


_BY_SPEC = {registered.spec: registered for registered in REGISTERED}


def verifier_type(spec: object) -> VerifierType:
    """The registered type of verifier `spec` (a spec record)."""
    found = _BY_SPEC.get(type(spec))
    if found is None:
        raise LookupError(f"no verifier type is registered for {type(spec).__name__}")
    return found


def package_graders() -> dict[str, Packaged]:
    """How the exported verifiers package grades each registered type (`write_package`)."""
    return {
        registered.name: registered.packaged for registered in REGISTERED if registered.packaged
    }


async def grade(task: Task, completion: str, llm: LLMClient) -> Score:
    """Score `completion` for `task` as its verifier's type does (the judge panel where the type
    asks it; LLMError("judge_undecided") rather than a guess). Raises TypeError for a type its
    family grades (unit tests in the sandbox, a world's final state)."""
    found = verifier_type(task.verifier)
    if found.grade is None:
        raise TypeError(f"a {found.name} verifier is graded by its family")
    return await found.grade(task, completion, llm)
