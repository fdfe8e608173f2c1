"""Function-rebuild tasks: take the body out of a function the tests cover and ask for it back.

The known end state is the original function. A function is a task only if taking its body out
makes tests fail that pass with it (its fail-to-pass tests); every other passing test must keep
passing. The prompt shows the file with the body taken out, the signature and (by default) the
docstring, and the lines elsewhere that call it; the tests stay hidden.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from data.git import git
from data.languages import Language
from data.prompts import load_prompt
from data.records import Lineage, Task, Workspace, content_id
from generators.checks import CheckFailure
from generators.code_tasks import code_task, files_at
from harnesses.edits import file_diff
from harnesses.sandbox import Limits
from harnesses.workspace import try_edits

GENERATOR = "function_rebuild"
VERSION = "1"
STATEMENT = load_prompt(__file__, "function_rebuild")
STUB = "raise NotImplementedError"
MAX_CALL_SITES = 6


@dataclass(frozen=True)
class Target:
    """A function whose body can be taken out (line numbers 1-based, inclusive)."""

    path: str
    qualname: str
    name: str
    is_method: bool
    doc_start: int | None  # the docstring's first line, if it has one
    body_start: int  # the first statement after the docstring
    end: int
    indent: str

    @property
    def item(self) -> str:
        return f"{self.path}::{self.qualname}"


@dataclass(frozen=True)
class Rejected:
    item: str
    reason: str
    detail: str = ""


def targets(path: str, source: str) -> list[Target]:
    """Top-level functions and methods of `source` with a body worth rebuilding (not a bare
    `pass`, `...` or `raise`, and not on the `def` line)."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(_target(path, source, node, ""))
        elif isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    found.append(_target(path, source, child, node.name))
    return [t for t in found if t is not None]


def _target(
    path: str, source: str, node: ast.FunctionDef | ast.AsyncFunctionDef, owner: str
) -> Target | None:
    has_doc = ast.get_docstring(node, clean=False) is not None
    rest = node.body[1:] if has_doc else node.body
    if not rest or node.body[0].lineno == node.lineno or node.end_lineno is None:
        return None
    if len(rest) == 1 and _is_placeholder(rest[0]):
        return None
    line = source.splitlines()[rest[0].lineno - 1]
    return Target(
        path=path,
        qualname=f"{owner}.{node.name}" if owner else node.name,
        name=node.name,
        is_method=bool(owner),
        doc_start=node.body[0].lineno if has_doc else None,
        body_start=rest[0].lineno,
        end=node.end_lineno,
        indent=line[: len(line) - len(line.lstrip())],
    )


def _is_placeholder(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Pass | ast.Raise):
        return True
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def blanked(source: str, target: Target, keep_docstring: bool = True) -> str:
    """`source` with the target's body (and, unless kept, its docstring) replaced by a stub."""
    lines = source.splitlines(keepends=True)
    start = target.body_start if keep_docstring or target.doc_start is None else target.doc_start
    return "".join([*lines[: start - 1], f"{target.indent}{STUB}\n", *lines[target.end :]])


def call_sites(target: Target, sources: dict[str, str]) -> list[str]:
    """Lines that call the target, as `path:line: code` (its own definition aside)."""
    needle = f".{target.name}(" if target.is_method else f"{target.name}("
    sites = []
    for path, text in sources.items():
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if needle in line and not stripped.startswith(("def ", "async def ")):
                sites.append(f"{path}:{number}: {stripped}")
    return sites[:MAX_CALL_SITES]


@dataclass(frozen=True)
class RepoAtHead:
    repo_id: str
    origin: str
    mirror: Path
    head: str
    language: Language


def rebuild_tasks(
    repo: RepoAtHead, limits: Limits, max_functions: int, max_prompt_chars: int
) -> Iterator[Task | Rejected]:
    """Function-rebuild tasks of `repo` at its HEAD: up to `max_functions` candidates (in a
    stable order spread over the files), each tried in the sandbox."""
    paths = [
        p
        for p in git(repo.mirror, "ls-tree", "-r", "--name-only", repo.head).splitlines()
        if repo.language.is_source_file(p)
    ]
    sources: dict[str, str] = {}
    candidates: list[Target] = []
    for path in paths:
        try:
            sources.update(files_at(repo.mirror, repo.head, [path], max_prompt_chars))
            candidates += targets(path, sources[path])
        except (CheckFailure, SyntaxError, ValueError) as error:
            yield Rejected(path, "unparsable_source", type(error).__name__)
    candidates.sort(key=lambda t: content_id(repo.repo_id, t.item))
    workspace = Workspace(repo_id=repo.repo_id, origin=repo.origin, base=repo.head)
    baseline = try_edits(repo.mirror, workspace, None, [], limits).run
    passing = baseline.passed() if baseline else set()
    if not passing:
        yield Rejected(repo.repo_id, "tests_do_not_run")
        return
    for target in candidates[:max_functions]:
        yield _rebuild(repo, target, sources, passing, workspace, limits)


def _rebuild(
    repo: RepoAtHead,
    target: Target,
    sources: dict[str, str],
    passing: set[str],
    workspace: Workspace,
    limits: Limits,
) -> Task | Rejected:
    original = sources[target.path]
    stubbed = blanked(original, target)
    start = workspace.model_copy(update={"start_patch": file_diff(target.path, original, stubbed)})
    run = try_edits(repo.mirror, start, None, [], limits).run
    still = run.passed() if run else set()
    fail_to_pass, pass_to_pass = sorted(passing - still), sorted(passing & still)
    if not fail_to_pass:
        return Rejected(target.item, "not_covered", "no test fails without its body")
    others = {p: t for p, t in sources.items() if p != target.path}
    sites = call_sites(target, others)
    statement = STATEMENT.render(
        qualname=target.qualname,
        path=target.path,
        docstring=", its docstring" if target.doc_start else "",
        call_sites="\n\nIt is called like this:\n" + "\n".join(sites) if sites else "",
    )
    seed_text = "/".join([GENERATOR, VERSION, repo.repo_id, repo.head, target.item])
    lineage = Lineage(
        generator=GENERATOR,
        generator_version=VERSION,
        prompt_hash=STATEMENT.version,
        model="",
        seed=seed_text,
        knobs={
            "function": target.item,
            "level": "base",
            "docstring": "kept" if target.doc_start else "none",
            "functions": 1,
            "tests": "hidden",
        },
    )
    reference = file_diff(target.path, stubbed, original)
    shown = {target.path: stubbed}
    tests = (fail_to_pass, pass_to_pass)
    return code_task("function_rebuild", statement, shown, reference, start, tests, lineage)
