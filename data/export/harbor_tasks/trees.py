"""The repository trees of a code task, made at export from the version's workspace bundle:
the tree the agent starts from (the base revision, then the start patch), the tree the
reference leaves after each of its steps, and the hidden tests' patches up to each checkpoint
as one diff. Patches are applied with `git apply`, as the sandbox applies them, but outside it:
they are taskfoundry's own (start, reference, hidden tests), never an attempt, and applying one
runs nothing of the repository's."""

from __future__ import annotations

import shutil
from pathlib import Path

from data.repos import GitError, git
from data.runtime.code_grading import edits_of
from data.runtime.edits import Edits
from data.runtime.tree_diff import text_files, tree_diff
from data.runtime.workspace_bundle import unpack


class TreeError(RuntimeError):
    """A patch of the task's own does not apply, or its reference has no usable edits."""


def start_tree(bundle: Path, start_patch: str, dest: Path) -> Path:
    """The tree at `dest`: the bundle's base revision with `start_patch` applied."""
    tree = unpack(bundle, dest)
    _apply(tree, start_patch)
    return tree


def reference_trees(start: Path, reference: str, steps: int, scratch: Path) -> list[Path]:
    """The trees the reference change leaves after each of its `steps` (its `## Step N`
    sections for a sequence), each made from a copy of the last; test files set aside."""
    trees, last = [], start
    for number, edits in enumerate(edits_of(reference, steps)[0], start=1):
        if edits is None:
            raise TreeError(f"the reference has no usable edits in step {number}")
        tree = shutil.copytree(last, scratch / f"reference-{number}", symlinks=True)
        _apply_edits(tree, edits)
        trees.append(last := tree)
    return trees


def tests_up_to(start: Path, test_patches: list[str], scratch: Path) -> list[str]:
    """For each checkpoint, its test patch and those of the checkpoints before it as one diff
    on `start` (what a sequence's checkpoint has applied by the time its tests run)."""
    tree = shutil.copytree(start, scratch / "tests", symlinks=True)
    combined = []
    for patch in test_patches:
        _apply(tree, patch)
        combined.append(tree_diff(start, tree)[0])
    return combined


def changes(before: Path, after: Path) -> tuple[dict[str, str], list[str]]:
    """The text files `after` writes over `before` (path -> content) and those it deletes."""
    old, _ = text_files(before)
    new, _ = text_files(after)
    written = {path: text for path, text in new.items() if old.get(path) != text}
    return written, sorted(old.keys() - new.keys())


def _apply_edits(tree: Path, edits: Edits) -> None:
    _apply(tree, "".join(edits.diffs.values()), "--recount")
    for path, content in edits.files.items():
        target = tree / path
        if not target.parent.resolve().is_relative_to(tree.resolve()):
            raise TreeError(f"the reference writes outside the tree: {path}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")


def _apply(tree: Path, patch: str, *options: str) -> None:
    if not patch.strip():
        return
    staged = tree.parent / f".{tree.name}.patch"
    staged.write_text(patch, encoding="utf-8")
    # no repository above the tree may take the patch's paths as its own
    ceiling = {"GIT_CEILING_DIRECTORIES": str(tree.parent)}
    try:
        git(tree, "apply", *options, "--whitespace=nowarn", str(staged), env=ceiling)
    except GitError as error:
        raise TreeError(str(error)) from error
    finally:
        staged.unlink()
