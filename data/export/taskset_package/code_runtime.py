"""Code tasks of a taskfoundry package: an attempt is tried on a fresh copy of the task's
repository tree at its base revision (shipped in `workspaces/`), in taskfoundry's sandbox
runtime, and graded as taskfoundry grades it (`code_grading`): the start patch, the reply's
edits (test files set aside), the hidden test patch, then every fail-to-pass test must pass
and every pass-to-pass test keep passing; a commit sequence scores the share of its
checkpoints passed.

The sandbox (`sandbox`) runs the repository's code under bubblewrap, with no network, time
and memory limits and a scrubbed environment. The tests' virtualenv is built once per set of
requirements with pip (wheels only). Where the sandbox cannot be made here, grading raises
`NoVerdict` (`sandbox_unavailable`) saying why, unless
FOUNDRY_RUN_UNTRUSTED_CODE_WITHOUT_SANDBOX=1 is set, and so does any other failure of the
grader's own (`code_grading`): verifiers records the rollout as errored, never as a 0.

This file is copied as it is into each exported package (`data/export/verifiers_package.py`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from .runtime.code_grading import grade, outside_checks, points_of
from .runtime.sandbox import Limits
from .runtime.trial import Step, Trial, steps_in_tree
from .runtime.workspace_bundle import FOLDER, bundle_name, unpack

WORKSPACES = Path(__file__).resolve().parent / FOLDER
CHECKS: dict[str, list[Any]] = {}  # each task's outside checks, made once per process


def grade_code(
    reply: str, answer: str, verifier: dict[str, Any], workspace: dict[str, Any]
) -> float:
    """The reward of `reply` to a code task with reference patch `answer`, `unit_tests`
    verifier spec `verifier` and `workspace` (repository, base revision, patches), under
    taskfoundry's default sandbox limits."""
    bundle = WORKSPACES / bundle_name(workspace)

    def tried(steps: list[Step]) -> list[Trial]:
        with tempfile.TemporaryDirectory(prefix="taskfoundry-workspace-") as scratch:
            tree = unpack(bundle, Path(scratch) / "tree")
            return steps_in_tree(tree, workspace.get("start_patch", ""), steps, Limits())

    points = points_of(verifier, workspace.get("test_patch", ""))
    key = json.dumps([answer, verifier, workspace], sort_keys=True)
    if key not in CHECKS:
        CHECKS[key] = outside_checks(answer, points, tried)
    return grade(reply, answer, points, tried, CHECKS[key])[0]
