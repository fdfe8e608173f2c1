"""One home per concept: code outside a registry does not branch on the names the registry
owns. For each axis (verifier types, trainer environments, task kinds, source types) an AST
count of the places that do: an isinstance check against a verifier spec class, or a comparison (or
membership test) with a registered name written out or with a constant that holds one. The
files left are listed with their counts; a new branch, or a new file, fails, and a file that
drops one must lower its count (issue 42 moves the rest into registries). A name kept in a set
elsewhere escapes the count: it is a floor."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from data.records import VerifierSpec
from families import kinds
from sources import REGISTERED as SOURCES

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("data", "harnesses", "generators", "judges", "families", "sources", "flows")
SPECS = typing.get_args(typing.get_args(VerifierSpec)[0])
# the harness (trainer environment) names, and the constants the code keeps them in
ENVIRONMENTS = {
    "closed_book",
    "open_book",
    "doc_search",
    "code_single_turn",
    "tool_replay",
    "world_tools",
    "world_actions",
    "single_turn",
}
ENVIRONMENT_CONSTANTS = {
    "HARNESS",
    "DOC_SEARCH",
    "SEARCH_HARNESS",
    "SINGLE_TURN",
    "SINGLE_TURN_HARNESSES",
    "ACTIONS_NAME",
}


def _axes() -> dict[str, tuple[set[str], set[str], set[str], Path, dict[str, int]]]:
    """axis -> (names written out, constants holding them, classes, its registry, files left)"""
    return {
        "verifier type": (
            {spec.model_fields["type"].default for spec in SPECS},
            set(),
            {spec.__name__ for spec in SPECS} | {"AnswerSpec", "_CallsSpec"},
            ROOT / "judges" / "verifier_types",
            {},
        ),
        "environment": (
            ENVIRONMENTS,
            ENVIRONMENT_CONSTANTS,
            set(),
            ROOT / "data" / "environments.py",
            {},
        ),
        "task kind": (set(kinds()), set(), set(), ROOT / "families", {}),
        "source type": ({s.name for s in SOURCES}, set(), set(), ROOT / "sources", {}),
    }


def branches(path: Path, names: set[str], constants: set[str], classes: set[str]) -> int:
    """How many places in `path` branch on one of `names` (or `constants`, or `classes`)."""
    found = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
            used = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            found += bool(used & classes)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = [e for side in sides for e in getattr(side, "elts", [side])]
            texts = {n.value for n in named if isinstance(n, ast.Constant)}
            held = {getattr(n, "id", None) or getattr(n, "attr", None) for n in named}
            found += bool(texts & names or held & constants)
    return found


@pytest.mark.parametrize("axis", list(_axes()))
def test_branching_on_a_registered_name_outside_its_registry_only_shrinks(axis):
    names, constants, classes, registry, left = _axes()[axis]
    counted = {
        str(path.relative_to(ROOT)): n
        for layer in LAYERS
        for path in sorted((ROOT / layer).rglob("*.py"))
        if path != registry and registry not in path.parents
        if (n := branches(path, names, constants, classes))
    }
    grown = {f: n for f, n in counted.items() if n > left.get(f, 0)}
    assert not grown, f"new branches on a {axis} (use its registry): {grown}"
    assert counted == left, f"fewer branches on a {axis} now: lower the counts to match"


def test_the_count_sees_each_kind_of_branch(tmp_path):
    source = (
        "def f(spec, row, task):\n"
        "    if isinstance(spec, RubricSpec):\n"
        "        return 1\n"
        "    if row['harness'] == 'doc_search' or row['harness'] in SINGLE_TURN_HARNESSES:\n"
        "        return 2\n"
        "    return task.kind in ('doc_qa', 'other')\n"
    )
    path = tmp_path / "module.py"
    path.write_text(source)
    assert branches(path, set(), set(), {"RubricSpec"}) == 1
    assert branches(path, ENVIRONMENTS, ENVIRONMENT_CONSTANTS, set()) == 2
    assert branches(path, {"doc_qa"}, set(), set()) == 1
