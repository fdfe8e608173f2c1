"""Code task workspaces: a repository state rebuilt from its mirror, then an attempt's edits
applied and the task's tests run, all inside the sandbox.

Order of a trial: check out `base`; in the sandbox apply the start patch (what the solver saw),
the solver's edits (test files set aside), the hidden test patch; run the tests.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from data.git import git
from data.records import Commit, Workspace
from harnesses.edits import Edits, apply_edits, apply_patch
from harnesses.pytest_runner import TestRun, run_pytest
from harnesses.python_env import ensure_env, requirements_of
from harnesses.sandbox import Completed, Limits, Sandbox


class WorkspaceError(RuntimeError):
    """The task's own patches no longer apply: the workspace cannot be rebuilt."""


@dataclass(frozen=True)
class Trial:
    """An attempt's outcome: the edits did not apply (`rejected`, the failed command), or the
    test run."""

    run: TestRun | None
    rejected: Completed | None = None


def checkout(mirror: Path, rev: str, dest: Path, tests_from: Commit | None = None) -> Path:
    """The tree of `rev` written to `dest` by git itself, through a throwaway index (git never
    writes through a symlinked folder, unlike archive extraction); with `tests_from`, the
    commit's test files as that commit has them (added, changed or removed)."""
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="foundry-index-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}

        def in_tree(*args: str) -> str:
            return git(mirror, f"--work-tree={dest}", *args, env=index)

        in_tree("read-tree", rev)
        for changed in tests_from.files if tests_from else []:
            if not changed.is_test:
                continue
            entry = git(mirror, "ls-tree", tests_from.sha, "--", changed.path).split()
            if entry:
                mode, _, blob = entry[:3]
                in_tree("update-index", "--add", "--cacheinfo", f"{mode},{blob},{changed.path}")
            else:
                in_tree("update-index", "--force-remove", "--", changed.path)
        in_tree("checkout-index", "--all")
    return dest


def environment(tree: Path) -> Path:
    """The virtualenv `tree` asks for (`requirements_of`); raises EnvError."""
    return ensure_env(requirements_of(tree))


def try_edits(
    mirror: Path, workspace: Workspace, edits: Edits | None, tests: list[str], limits: Limits
) -> Trial:
    """Rebuild `workspace`, apply `edits` (None: the empty patch) and run `tests`."""
    step = Step(edits, workspace.test_patch, tests)
    return try_steps(mirror, workspace, [step], limits)[0]


@dataclass(frozen=True)
class Step:
    """One step of an attempt: its edits (None: nothing), then the test patch, then tests."""

    edits: Edits | None
    test_patch: str
    tests: list[str]


def try_steps(mirror: Path, workspace: Workspace, steps: list[Step], limits: Limits) -> list[Trial]:
    """Rebuild `workspace` and take `steps` in order in one sandbox, each on the state the
    last one left; once a step's edits do not apply, the steps after it are not taken."""
    trials: list[Trial] = []
    with tempfile.TemporaryDirectory(prefix="foundry-workspace-") as scratch:
        tree = checkout(mirror, workspace.base, Path(scratch) / "tree")
        env = environment(tree)
        with Sandbox(tree, limits) as sandbox:
            _own_patch(sandbox, "start.patch", workspace.start_patch)
            for index, step in enumerate(steps):
                if step.edits is not None:
                    rejected = apply_edits(sandbox, step.edits)
                    if rejected is not None:
                        return [*trials, Trial(None, rejected)]
                _own_patch(sandbox, f"tests-{index}.patch", step.test_patch)
                trials.append(Trial(run_pytest(sandbox, env, step.tests)))
    return trials


def _own_patch(sandbox: Sandbox, name: str, patch: str) -> None:
    failed = apply_patch(sandbox, name, patch)
    if failed is not None:
        raise WorkspaceError(f"{name} does not apply: {(failed.stderr or failed.stdout)[-300:]}")
