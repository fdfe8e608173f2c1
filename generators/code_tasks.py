"""What every code task shares: the prompt (statement, the files it shows, the answer format),
the unit-test verifier and the task record.

The prompt is self-contained, so a trainer can pose it as is; the workspace rebuilds the
repository the reward function applies the attempt to.
"""

from __future__ import annotations

from pathlib import Path

from data.git import GitError, git
from data.prompts import load_prompt
from data.records import Lineage, Message, Task, TaskKind, VerifierSpec, Workspace
from generators.checks import CheckFailure

SYSTEM_PROMPT = load_prompt(__file__, "code_system")
FILES_PROMPT = load_prompt(__file__, "code_files")


def show_files(files: dict[str, str]) -> str:
    """Files as fenced blocks headed by their path, in the answer format's own shape."""
    return "\n\n".join(
        f"```python\n# file: {path}\n{text.rstrip()}\n```" for path, text in files.items()
    )


def files_at(mirror: Path, rev: str, paths: list[str], max_chars: int) -> dict[str, str]:
    """The text of `paths` at `rev` (read from git's objects, never from a checkout); raises
    CheckFailure when one is missing, not text, or the files are too long to show."""
    files = {}
    for path in paths:
        try:
            text = git(mirror, "show", f"{rev}:{path}")
        except GitError as error:
            raise CheckFailure("file_unreadable") from error
        if "\ufffd" in text or "\x00" in text:
            raise CheckFailure("file_unreadable")  # not UTF-8 text
        files[path] = text
    if sum(len(text) for text in files.values()) > max_chars:
        raise CheckFailure("files_too_long")
    return files


def code_task(
    kind: TaskKind,
    statement: str,
    shown: dict[str, str],
    reference_patch: str,
    workspace: Workspace,
    tests: tuple[list[str], list[str]],
    lineage: Lineage,
) -> Task:
    """A code task: the statement and `shown` files as its prompt, the reference patch as its
    answer, and its (fail-to-pass, pass-to-pass) tests as its verifier."""
    user = statement.strip()
    if shown:
        user += "\n\n" + FILES_PROMPT.render(files=show_files(shown))
    prompt = [
        Message(role="system", content=SYSTEM_PROMPT.template.strip()),
        Message(role="user", content=user.strip()),
    ]
    fail_to_pass, pass_to_pass = tests
    verifier = VerifierSpec(
        type="unit_tests", fail_to_pass=sorted(fail_to_pass), pass_to_pass=sorted(pass_to_pass)
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
