"""A solver's code edits, read from its reply: a unified diff, or whole files in fenced blocks.

Whole-file edits are blocks whose first line names the file (`# file: src/pkg/mod.py`); a
unified diff may be bare or fenced. Paths must stay inside the repository (relative, no `..`).
Edits to test files are set aside, never applied: the verifier's tests are the task's, not the
solver's.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from .errors import ReasonedError
from .sandbox import Completed, Sandbox

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
FILE_HEADER = re.compile(r"^\s*(?:#|//)\s*file:\s*(\S+)\s*$", re.IGNORECASE)
DIFF_FILE = re.compile(r"^(?:diff --git a/\S+ b/(\S+)|\+\+\+ (?:b/)?(\S+))", re.MULTILINE)
DIFF_START = re.compile(r"^(?:diff --git |--- )", re.MULTILINE)


class EditError(ReasonedError):
    """The reply holds no usable edit; `reason` is stable, for counting."""


@dataclass(frozen=True)
class Edits:
    """Per file: a unified-diff section or a whole new content."""

    diffs: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    @property
    def paths(self) -> list[str]:
        return sorted({*self.diffs, *self.files})

    def without(self, drop: Callable[[str], bool]) -> tuple[Edits, list[str]]:
        """These edits minus the files `drop` picks, and the paths dropped."""
        dropped = [p for p in self.paths if drop(p)]
        kept = Edits(
            {p: d for p, d in self.diffs.items() if not drop(p)},
            {p: c for p, c in self.files.items() if not drop(p)},
        )
        return kept, dropped


def parse_edits(reply: str) -> Edits:
    """The edits in a solver's reply; raises EditError when there are none or a path is
    unsafe."""
    diff_text = "\n".join(_diff_blocks(reply))
    diffs = split_diff(diff_text) if diff_text else {}
    files = {}
    for block in FENCE.findall(reply):
        first, _, body = block.partition("\n")
        header = FILE_HEADER.match(first)
        if header:
            files[header.group(1)] = body
    edits = Edits(diffs, files)
    if not edits.paths:
        raise EditError("no_edits", "neither a unified diff nor a `# file: PATH` block")
    for path in edits.paths:
        check_path(path)
    return edits


def _diff_blocks(reply: str) -> list[str]:
    fenced = [b for b in FENCE.findall(reply) if DIFF_START.search(b)]
    if fenced:
        return fenced
    start = DIFF_START.search(reply)
    return [reply[start.start() :]] if start else []


def split_diff(diff: str) -> dict[str, str]:
    """A unified diff's sections by the path they change (the new path; the old for a
    deletion)."""
    starts = [m.start() for m in re.finditer(r"^diff --git ", diff, re.MULTILINE)]
    if not starts:
        starts = [m.start() for m in re.finditer(r"^--- ", diff, re.MULTILINE)]
    sections = {}
    for begin, end in zip(starts, [*starts[1:], len(diff)], strict=True):
        section = diff[begin:end]
        path = _section_path(section)
        if path:
            sections[path] = section if section.endswith("\n") else section + "\n"
    return sections


def _section_path(section: str) -> str:
    plus = re.search(r"^\+\+\+ (?:b/)?(\S+)", section, re.MULTILINE)
    if plus and plus.group(1) != "/dev/null":
        return plus.group(1)
    minus = re.search(r"^--- (?:a/)?(\S+)", section, re.MULTILINE)
    if minus and minus.group(1) != "/dev/null":
        return minus.group(1)
    header = re.search(r"^diff --git a/(\S+) b/(\S+)", section, re.MULTILINE)
    return header.group(2) if header else ""


def check_path(path: str) -> None:
    """A path an edit may touch: relative, inside the repository, not in `.git`."""
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or ".." in parts or parts[0] == ".git":
        raise EditError("unsafe_path", path)


def apply_edits(sandbox: Sandbox, edits: Edits) -> Completed | None:
    """Apply `edits` to the sandbox's tree, inside the sandbox; the failed command, if any."""
    if edits.diffs:  # a model's hunk headers often miscount: git recounts them
        failed = apply_patch(sandbox, "solver.patch", "".join(edits.diffs.values()), "--recount")
        if failed is not None:
            return failed
    for index, (path, content) in enumerate(sorted(edits.files.items())):
        staged = sandbox.write(f"solver-file-{index}", content)
        written = sandbox.run(["install", "-D", "-m", "644", str(staged), path])
        if not written.ok:
            return written
    return None


def apply_patch(sandbox: Sandbox, name: str, patch: str, *options: str) -> Completed | None:
    """Apply `patch` (written to the sandbox's tmp as `name`) to its tree, inside the sandbox,
    with `git apply` and `options`; the failed command, if it did not apply."""
    if not patch.strip():
        return None
    path = sandbox.write(name, patch)
    applied = sandbox.run(["git", "apply", *options, "--whitespace=nowarn", str(path)])
    return None if applied.ok else applied


def file_diff(path: str, old: str, new: str) -> str:
    """A unified diff of one file from `old` to `new` text, as `git apply` reads it."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


STEP_HEADING = re.compile(r"^#{1,6}\s*Step\s+(\d+)\b.*$", re.MULTILINE | re.IGNORECASE)


def split_steps(reply: str, steps: int) -> list[str]:
    """The parts of a reply under `## Step N` headings, one per step (empty where a step has
    no heading)."""
    parts = [""] * steps
    marks = list(STEP_HEADING.finditer(reply))
    ends = [mark.start() for mark in marks[1:]] + [len(reply)] * bool(marks)
    for mark, end in zip(marks, ends, strict=True):
        number = int(mark.group(1))
        if 1 <= number <= steps:
            parts[number - 1] += reply[mark.end() : end]
    return parts
