"""Code task workspaces: a repository state rebuilt from its mirror, then an attempt tried on
it (`data.runtime.trial`: in the sandbox the start patch, the solver's edits, the hidden test
patch, the tests)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from data.lake import Workspace
from data.repos import checkout
from data.runtime.edits import Edits, apply_edits, apply_patch
from data.runtime.languages import is_any_test_file, project_files
from data.runtime.sandbox import Limits, Sandbox
from data.runtime.test_runners import test_suite
from data.runtime.trial import Step, Trial, WorkspaceError, steps_in_tree


def try_edits(
    mirror: Path, workspace: Workspace, edits: Edits | None, tests: list[str], limits: Limits
) -> Trial:
    """Rebuild `workspace`, apply `edits` (None: the empty patch) and run `tests`."""
    step = Step(edits, workspace.test_patch, tests)
    return try_steps(mirror, workspace, [step], limits)[0]


def try_steps(mirror: Path, workspace: Workspace, steps: list[Step], limits: Limits) -> list[Trial]:
    """Rebuild `workspace` from `mirror` and take `steps` in order (`steps_in_tree`)."""
    with tempfile.TemporaryDirectory(prefix="foundry-workspace-") as scratch:
        tree = checkout(mirror, workspace.base, Path(scratch) / "tree")
        return steps_in_tree(tree, workspace.start_patch, steps, limits)


def copies_of(mirror: Path, workspace: Workspace, modules: list[str]) -> list[str]:
    """Where the environment `workspace`'s tests run in holds another copy of `modules`
    (`TestSuite.copies_in`)."""
    with tempfile.TemporaryDirectory(prefix="foundry-workspace-") as scratch:
        tree = checkout(mirror, workspace.base, Path(scratch) / "tree")
        return test_suite(tree).copies_in(tree, modules)


def files_at_start(
    mirror: Path, workspace: Workspace, paths: list[str], limits: Limits
) -> tuple[dict[str, str], dict[str, str]]:
    """What an attempt at `workspace` starts from: the text of `paths` ("" for a file the
    start does not have yet, which the reference creates), and of its test files (the base
    revision, then the start patch, applied in the sandbox)."""
    with tempfile.TemporaryDirectory(prefix="foundry-workspace-") as scratch:
        tree = checkout(mirror, workspace.base, Path(scratch) / "tree")
        with Sandbox(tree, limits) as sandbox:
            failed = apply_patch(sandbox, "start.patch", workspace.start_patch)
            if failed is not None:
                raise WorkspaceError(f"start.patch does not apply: {failed.stderr[-300:]}")
            files = {p: _text(sandbox.tree / p) for p in paths}
            tests = {
                p: (sandbox.tree / p).read_text(errors="replace")
                for p in project_files(sandbox.tree)
                if is_any_test_file(p) and p.endswith(".py")
            }
    return files, tests


def files_around_last(
    mirror: Path, workspace: Workspace, steps: list[Edits], limits: Limits
) -> tuple[dict[str, str], dict[str, str]]:
    """The text of the paths the last of `steps` edits, before and after it, the steps applied
    in order after the start patch ("" for a file that is not there). Raises WorkspaceError
    where a step does not apply."""
    paths = steps[-1].paths
    with tempfile.TemporaryDirectory(prefix="foundry-workspace-") as scratch:
        tree = checkout(mirror, workspace.base, Path(scratch) / "tree")
        with Sandbox(tree, limits) as sandbox:
            failed, what = apply_patch(sandbox, "start.patch", workspace.start_patch), "start.patch"
            for number, edits in enumerate(steps, start=1):
                if failed is None:
                    before = {p: _text(sandbox.tree / p) for p in paths}
                    failed, what = apply_edits(sandbox, edits), f"step {number}"
            if failed is not None:
                raise WorkspaceError(f"{what} does not apply: {failed.stderr[-300:]}")
            return before, {p: _text(sandbox.tree / p) for p in paths}


def _text(path: Path) -> str:
    return path.read_text() if path.is_file() else ""
