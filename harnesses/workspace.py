"""Code task workspaces: a repository state rebuilt from its mirror, then an attempt tried on
it (`harnesses.trial`: in the sandbox the start patch, the solver's edits, the hidden test
patch, the tests)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from data.git import git
from data.records import Commit, Workspace
from harnesses.edits import Edits
from harnesses.sandbox import Limits
from harnesses.trial import Step, Trial, steps_in_tree


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
