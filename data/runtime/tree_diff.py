"""What an agent that edits a repository in place changed, as a reply the code grader reads: the
text files it changed, added or deleted under a tree, against the tree it started from, as one
unified diff (`diff --git` sections, as `git apply` and `edits.parse_edits` read them).

Only regular text files count: symlinks, files that are not UTF-8 text and paths with
whitespace cannot be written as such a diff and are set aside (and named), and so are the
folders tools leave behind (`IGNORED`), which are no edit of the repository's.

It imports nothing of taskfoundry's outside this package: an exported Harbor task ships it.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from .edits import file_diff

IGNORED = frozenset(
    {".git", "__pycache__", "node_modules", ".venv", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
)


def tree_diff(start: Path, end: Path) -> tuple[str, list[str]]:
    """The diff that takes `start` to `end`, and the paths set aside (sorted)."""
    before, skipped_before = text_files(start)
    after, skipped_after = text_files(end)
    sections = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old != new:
            sections.append(_section(path, old, new))
    return "".join(sections), sorted(skipped_before | skipped_after)


def text_files(tree: Path) -> tuple[dict[str, str], set[str]]:
    """The regular UTF-8 text files under `tree` by relative path, and the paths set aside."""
    files: dict[str, str] = {}
    skipped: set[str] = set()
    for folder, dirs, names in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED)
        base = Path(folder)
        for name in names:
            path = base / name
            relative = path.relative_to(tree).as_posix()
            if path.is_symlink() or not path.is_file() or any(c.isspace() for c in relative):
                skipped.add(relative)
                continue
            try:
                files[relative] = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                skipped.add(relative)
    return files, skipped


def _section(path: str, old: str | None, new: str | None) -> str:
    header = f"diff --git a/{path} b/{path}\n"
    if old is None:
        return header + "new file mode 100644\n" + _lines(path, "", new or "", "/dev/null", None)
    if new is None:
        return header + "deleted file mode 100644\n" + _lines(path, old, "", None, "/dev/null")
    return header + file_diff(path, old, new)


def _lines(path: str, old: str, new: str, source: str | None, target: str | None) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=source or f"a/{path}",
        tofile=target or f"b/{path}",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
