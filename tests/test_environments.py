"""The environment registry (`data/export/environments.py`): each taskset row has one environment,
the first that claims it, and the exported package's tool server offers a toolset for each."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from data.export import environments, package_row
from data.export.environments import REGISTERED, environment_of
from data.runtime.replay_runtime import EXTRA_TURNS

ROOT = Path(__file__).resolve().parent.parent


def row(harness: str = "closed_book", **columns: object) -> dict:
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q?"}]
    base = {"harness": harness, "world": None, "environment": None, "prompt": prompt}
    return base | {name: json.dumps(value) for name, value in columns.items()}


def the_packages_toolsets() -> set[str]:
    source = ROOT / "data" / "export" / "taskset_package" / "tools.py"
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "TOOLSETS":
            return {key.value for key in node.value.keys}
    raise AssertionError("the package's tool server defines no TOOLSETS")


def test_the_tool_server_has_a_toolset_for_each_environment_and_no_other():
    assert {found.name for found in REGISTERED} == the_packages_toolsets()


def test_each_row_has_the_environment_its_columns_and_harness_say():
    world = {"max_turns": 7, "spec": "{}", "initial": {}}
    replay = {"recorded": [{}, {}], "tools": []}
    assert environment_of(row("world_tools", world=world)) is environments.WORLD
    assert environment_of(row("tool_replay", environment=replay)) is environments.REPLAY
    assert environment_of(row("doc_search")) is environments.SEARCH
    assert environment_of(row("open_book")) is environments.SINGLE_TURN
    assert environments.WORLD.max_turns(row(world=world), 5) == 7
    assert environments.REPLAY.max_turns(row(environment=replay), 5) == 2 + EXTRA_TURNS


def test_a_search_row_is_packaged_with_its_instructions_turns_and_toolset():
    task = {**row("doc_search"), "task_id": "t", "kind": "doc_qa", "answer": "A"}
    packaged = package_row(task, searches=6)
    assert packaged["toolset"] == "search" and packaged["max_turns"] == 6
    system = packaged["prompt"][0]["content"]
    assert system.startswith(environments.SEARCH_INSTRUCTION.template.strip()[:40])
    assert system.endswith("Be brief.") and task["prompt"][0]["content"] == "Be brief."
