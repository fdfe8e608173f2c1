"""A code attempt tried on a repository tree: in the sandbox, the start patch (what the solver
saw), then per step the solver's edits (test files set aside by the caller), the step's hidden
test patch and its tests.

It needs only the tree, not where the tree came from (taskfoundry checks it out of a mirror,
an exported package unpacks it), so it stands alone in an exported package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harnesses.edits import Edits, apply_edits, apply_patch
from harnesses.sandbox import Completed, Limits, Sandbox
from harnesses.test_run import TestRun
from harnesses.test_runners import test_suite


class WorkspaceError(RuntimeError):
    """The task's own patches no longer apply: the workspace cannot be rebuilt."""


@dataclass(frozen=True)
class Trial:
    """An attempt's outcome: the edits did not apply (`rejected`, the failed command), or the
    test run."""

    run: TestRun | None
    rejected: Completed | None = None


@dataclass(frozen=True)
class Step:
    """One step of an attempt: its edits (None: nothing), then the test patch, then tests."""

    edits: Edits | None
    test_patch: str
    tests: list[str]


def steps_in_tree(tree: Path, start_patch: str, steps: list[Step], limits: Limits) -> list[Trial]:
    """Take `steps` in order on `tree` (a fresh copy of the task's base revision, which the
    sandbox copies again), after `start_patch`, each on the state the last one left; once a
    step's edits do not apply, the steps after it are not taken."""
    trials: list[Trial] = []
    suite = test_suite(tree)
    with Sandbox(tree, limits) as sandbox:
        _own_patch(sandbox, "start.patch", start_patch)
        for index, step in enumerate(steps):
            if step.edits is not None:
                rejected = apply_edits(sandbox, step.edits)
                if rejected is not None:
                    return [*trials, Trial(None, rejected)]
            _own_patch(sandbox, f"tests-{index}.patch", step.test_patch)
            trials.append(Trial(suite.run(sandbox, step.tests)))
    return trials


def _own_patch(sandbox: Sandbox, name: str, patch: str) -> None:
    failed = apply_patch(sandbox, name, patch)
    if failed is not None:
        raise WorkspaceError(f"{name} does not apply: {(failed.stderr or failed.stdout)[-300:]}")
