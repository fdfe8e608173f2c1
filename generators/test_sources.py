"""The source of tests named by pytest node ids, read from a revision: shown in a prompt at the
easier difficulty levels of code tasks ("these tests must pass")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from data.repos import GitError, git

MAX_TESTS = 4


def test_sources(mirror: Path, rev: str, test_ids: list[str], max_chars: int) -> list[str]:
    """Fenced blocks with the source of up to MAX_TESTS of `test_ids` (`path::[Class::]name`,
    parameters ignored) as `rev` has them, within `max_chars` in all; tests that cannot be found
    are left out."""
    blocks: list[str] = []
    seen: set[tuple[str, ...]] = set()
    files: dict[str, ast.Module | None] = {}
    texts: dict[str, str] = {}
    for test_id in test_ids:
        path, *names = re.sub(r"\[.*\]$", "", test_id).split("::")
        key = (path, *names)
        if key in seen or not names:
            continue
        seen.add(key)
        if path not in files:
            texts[path], files[path] = _parse(mirror, rev, path)
        node = _find(files[path], names)
        if node is None:
            continue
        segment = ast.get_source_segment(texts[path], node) or ""
        block = f"```python\n# from {path}\n{segment}\n```"
        if sum(map(len, blocks)) + len(block) > max_chars:
            break
        blocks.append(block)
        if len(blocks) == MAX_TESTS:
            break
    return blocks


def _parse(mirror: Path, rev: str, path: str) -> tuple[str, ast.Module | None]:
    try:
        text = git(mirror, "show", f"{rev}:{path}")
        return text, ast.parse(text)
    except (GitError, SyntaxError, ValueError):
        return "", None


def _find(module: ast.Module | None, names: list[str]) -> ast.AST | None:
    body = module.body if module else []
    node: ast.AST | None = None
    for name in names:
        node = next(
            (
                n
                for n in body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and n.name == name
            ),
            None,
        )
        if node is None:
            return None
        body = node.body if isinstance(node, ast.ClassDef) else []
    return node
