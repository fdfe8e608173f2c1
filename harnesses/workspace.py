"""Code task workspaces: a repository state rebuilt from its mirror, then an attempt tried on
it (`harnesses.trial`: in the sandbox the start patch, the solver's edits, the hidden test
patch, the tests)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from data.git import checkout
from data.records import Workspace
from harnesses.edits import Edits
from harnesses.sandbox import Limits
from harnesses.trial import Step, Trial, steps_in_tree


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
