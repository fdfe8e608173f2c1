"""The tasks of a lake the red team attacks: every task whose verifier type grades a reply
itself (the registry's, `judges.verifier_types`) that passed verification, or one per family;
every code task (Python, JavaScript or TypeScript) that passed its gold self-check, or one per
family and language."""

from __future__ import annotations

from data.lake import Lake, Task
from data.runtime.edits import parse_edits
from harnesses.workspace import files_at_start
from judges.redteam.code_attacks import CodeAttack
from judges.redteam.run import CodeTarget
from judges.redteam.suites import code_attacks, runs_on_node
from judges.unit_tests import UnitTests, checkpoints_of
from judges.verifier_types import verifier_type

PASSED = "gold_self_check_passed"


def verified_tasks(lake: Lake, every_task: bool = False) -> list[Task]:
    """The tasks that passed verification whose verifier type grades a reply itself (its
    `grade`: answers, reports, tool calls, a judged type; not those its family grades, unit
    tests and a world's final state), in task id order: every one, or the first of each
    family."""
    done = {
        r["item_id"]
        for r in lake.rows("SELECT item_id FROM status WHERE stage = 'verify' AND status = 'done'")
    }
    tasks = sorted((t for t in lake.records("tasks") if t.task_id in done), key=lambda t: t.task_id)
    graded = [t for t in tasks if verifier_type(t.verifier).grade is not None]
    if every_task:
        return graded
    firsts: dict[str, Task] = {}
    for task in graded:
        firsts.setdefault(task.kind, task)
    return list(firsts.values())


def verified_code_tasks(lake: Lake) -> list[Task]:
    """The code tasks whose gold self-check passed, in task id order."""
    passed = {
        r["item_id"]
        for r in lake.rows(
            "SELECT item_id FROM status WHERE stage = 'verify' AND reason = ?", [PASSED]
        )
    }
    tasks = [t for t in lake.records("tasks") if t.workspace is not None and t.task_id in passed]
    return sorted(tasks, key=lambda t: t.task_id)  # type: ignore[attr-defined]


def code_targets(
    tasks: list[Task], unit_tests: UnitTests, every_task: bool = False
) -> tuple[list[tuple[CodeTarget, list[CodeAttack]]], list[str]]:
    """The targets among `tasks` (one per family and language unless `every_task`), each with
    its attacks, and why the others are not attacked (no outside check, a commit sequence)."""
    targets, skipped, seen = [], [], set()
    for task in tasks:
        paths = sorted(parse_edits(task.answer).paths)
        family = (task.kind, runs_on_node(paths))
        if family in seen and not every_task:
            continue
        points = checkpoints_of(task)
        if len(points) != 1:
            skipped.append(f"{task.kind} {task.task_id}: a sequence of {len(points)} steps")
            continue
        checks = unit_tests.checks(task)
        if checks[0] is None:
            skipped.append(f"{task.kind} {task.task_id}: no outside check")
            continue
        assert task.workspace is not None  # code tasks carry their workspace
        mirror = unit_tests.mirrors[task.workspace.repo_id]
        files, _ = files_at_start(mirror, task.workspace, paths, unit_tests.limits)
        trier = unit_tests.trier(task)
        target = CodeTarget(task.task_id, task.kind, files, task.answer, points, trier, checks)
        targets.append((target, code_attacks(files, checks[0].shown)))
        seen.add(family)
    return targets, skipped
