"""What every code task shares: the prompt (statement, the files it shows, the answer format),
the unit-test verifier and the task record.

The prompt is self-contained, so a trainer can pose it as is; the workspace rebuilds the
repository the reward function applies the attempt to.
"""

from __future__ import annotations

from pathlib import Path

from data.lake import Checkpoint, Lineage, Message, Task, UnitTestsSpec, Workspace
from data.prompts import load_prompt
from data.repos import GitError, git
from data.runtime.languages import of_path
from generators.checks import CheckFailure

SYSTEM_PROMPT = load_prompt(__file__, "code_system")
FILES_PROMPT = load_prompt(__file__, "code_files")


EXCERPT_CONTEXT = 30  # lines shown around each region of a file too long to show whole
Region = tuple[int, int]  # first and last line, 1-based, inclusive


def show_files(files: dict[str, str], regions: dict[str, list[Region]], max_chars: int) -> str:
    """Files as fenced blocks headed by their path, in the answer format's own shape. A file
    longer than half of `max_chars` is shown as excerpts around its `regions`, each headed by
    its line numbers; raises CheckFailure when even that is longer than `max_chars`."""
    blocks = []
    for path, text in files.items():
        language = of_path(path)
        fence, comment = language.fence, language.comment
        if len(text) <= max_chars // 2 or not regions.get(path):
            blocks.append(f"```{fence}\n{comment} file: {path}\n{text.rstrip()}\n```")
            continue
        lines = text.splitlines()
        for first, last in _windows(regions[path], len(lines)):
            body = "\n".join(lines[first - 1 : last])
            header = f"{comment} file: {path} (excerpt: lines {first}-{last} of {len(lines)})"
            blocks.append(f"```{fence}\n{header}\n{body}\n```")
    shown = "\n\n".join(blocks)
    if len(shown) > max_chars:
        raise CheckFailure("files_too_long")
    return shown


def _windows(regions: list[Region], n_lines: int) -> list[Region]:
    """The regions widened by EXCERPT_CONTEXT lines and merged where they overlap."""
    windows: list[Region] = []
    for first, last in sorted(regions):
        first, last = max(1, first - EXCERPT_CONTEXT), min(n_lines, last + EXCERPT_CONTEXT)
        if windows and first <= windows[-1][1] + 1:
            windows[-1] = (windows[-1][0], max(windows[-1][1], last))
        else:
            windows.append((first, last))
    return windows


def statement_of(task: Task) -> str:
    """The statement of a code task: its question without the files it shows."""
    heading = FILES_PROMPT.template.split("$files")[0].strip()
    return task.question.split(heading)[0].strip()


def paths_at(mirror: Path, rev: str, paths: list[str]) -> set[str]:
    """Which of `paths` are files at `rev`."""
    if not paths:
        return set()
    return set(git(mirror, "ls-tree", "-r", "--name-only", rev, "--", *paths).splitlines())


def files_at(mirror: Path, rev: str, paths: list[str]) -> dict[str, str]:
    """The text of `paths` at `rev` (read from git's objects, never from a checkout); raises
    CheckFailure when one is missing or not text."""
    files = {}
    for path in paths:
        try:
            text = git(mirror, "show", f"{rev}:{path}")
        except GitError as error:
            raise CheckFailure("file_unreadable") from error
        if "\ufffd" in text or "\x00" in text:
            raise CheckFailure("file_unreadable")  # not UTF-8 text
        files[path] = text
    return files


def code_task(
    kind: str,
    statement: str,
    shown: dict[str, str],
    reference_patch: str,
    workspace: Workspace,
    tests: tuple[list[str], list[str]],
    lineage: Lineage,
    regions: dict[str, list[Region]],
    max_prompt_chars: int,
    checkpoints: list[Checkpoint] | None = None,
) -> Task:
    """A code task: the statement and `shown` files (long ones as excerpts around `regions`)
    as its prompt, the reference patch as its answer, and its (fail-to-pass, pass-to-pass)
    tests as its verifier."""
    user = statement.strip()
    if shown:
        files = show_files(shown, regions, max_prompt_chars)
        user += "\n\n" + FILES_PROMPT.render(files=files)
    prompt = [
        Message(role="system", content=SYSTEM_PROMPT.template.strip()),
        Message(role="user", content=user.strip()),
    ]
    fail_to_pass, pass_to_pass = tests
    verifier = UnitTestsSpec(
        fail_to_pass=sorted(fail_to_pass),
        pass_to_pass=sorted(pass_to_pass),
        checkpoints=checkpoints or [],
    )
    workspace = workspace.model_copy(update={"files": sorted(shown)})
    return Task(
        task_id=Task.make_id(kind, prompt, reference_patch, verifier, workspace),
        kind=kind,
        prompt=prompt,
        answer=reference_patch,
        verifier=verifier,
        evidence=[],
        source=[],
        lineage=lineage,
        workspace=workspace,
    )
