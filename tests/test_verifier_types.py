"""The verifier registry (`judges/verifier_types/`): every verifier spec has its type there,
scoring, the package's graders and the red team's aims go through it (that nothing else
branches on a verifier type is `tests/test_branching.py`'s)."""

from __future__ import annotations

import ast
import asyncio
import typing
from pathlib import Path

import pytest

from data.lake import VerifierSpec, WorldStateSpec
from judges.redteam import answer_attacks
from judges.verifier_types import REGISTERED, grade, package_graders, verifier_type
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM
from tests.test_generator_and_judges import first_task

ROOT = Path(__file__).resolve().parent.parent
SPECS = typing.get_args(typing.get_args(VerifierSpec)[0])
TYPE_NAMES = {spec.model_fields["type"].default for spec in SPECS}


def test_every_verifier_spec_has_its_registered_type():
    assert [t.spec for t in REGISTERED] == list(SPECS)
    assert [t.name for t in REGISTERED] == [s.model_fields["type"].default for s in SPECS]
    for spec in SPECS:
        assert verifier_type(spec.model_construct()).spec is spec


def test_each_type_must_refuse_attacks_the_red_team_makes_and_a_judged_one_injection():
    made = {attack.kind for attack in answer_attacks.ATTACKS}
    for registered in REGISTERED:
        assert set(registered.must_refuse) <= made, registered.name
        assert not registered.judged or "prompt injection" in registered.must_refuse


def the_packages_graders() -> set[str]:
    """The graders the exported package's taskset module defines (`TaskfoundryTask.GRADERS`)."""
    source = ROOT / "data" / "export" / "taskset_package" / "taskset.py"
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "GRADERS":
            return {key.value for key in node.value.keys}
    raise AssertionError("the package defines no GRADERS")


def test_the_package_has_a_grader_for_each_type_the_registry_packages_and_no_other():
    named = {p.grader for p in package_graders().values() if p.grader is not None}
    assert named == the_packages_graders()
    for registered in REGISTERED:
        packaged = registered.packaged
        assert packaged is not None, f"{registered.name}: say how the package grades it"
        assert (packaged.grader is None) == bool(packaged.why_not), registered.name


def test_a_type_its_family_grades_is_not_graded_here():
    task = first_task(ScriptedLLM(Oracle().respond))
    world_task = task.model_copy(update={"verifier": WorldStateSpec(final_state={})})
    with pytest.raises(TypeError, match="world_state verifier is graded by its family"):
        asyncio.run(grade(world_task, "anything", ScriptedLLM(Oracle().respond)))
