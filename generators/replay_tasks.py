"""Commit-replay tasks: a replayed commit's parent is the start, a statement says what to
change, and the commit's own tests (hidden from the solver) verify the attempt.

The statement is written by the generator model from the commit message, the source diff and
the tests. It must not copy a line the reference patch adds (`checks.check_no_leak`); when the
model's statement fails that or is unusable, the commit message stands in, if it passes the same
check. Which one the task carries is its `statement` knob.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from data.config import CodeConfig
from data.lake import Commit, CommitReplay, Lineage, Task, Workspace, seed_for
from data.llm import LLMClient, LLMError
from data.prompts import load_prompt
from data.runtime.edits import split_diff
from generators.checks import CheckFailure, check_no_leak
from generators.code_tasks import code_task, files_at, show_files

KIND = "commit_replay"  # the kind of the tasks it writes
GENERATOR = "commit_replay"
VERSION = "1"
STATEMENT_PROMPT = load_prompt(__file__, "replay_statement")
# What the statement prompt shows of the change and its tests: enough for a statement, and
# within a small model's context window.
MAX_DIFF_CHARS = 3000
MAX_TESTS_CHARS = 2000
MAX_STATEMENT_CHARS = 3000
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? ", re.MULTILINE)
MIN_STATEMENT_WORDS = 12


class StatementDraft(BaseModel):
    # no max_length: a long repeat bound makes grammar-constrained servers give up; checked below
    model_config = ConfigDict(extra="ignore")
    statement: str = Field(min_length=20)


@dataclass(frozen=True)
class RepoOrigin:
    repo_id: str
    origin: str
    mirror: Path


async def replay_task(
    replay: CommitReplay, commit: Commit, repo: RepoOrigin, llm: LLMClient, config: CodeConfig
) -> Task:
    """The commit-replay task of `replay`; raises CheckFailure when no statement holds up or
    the files to show cannot be shown."""
    changed = split_diff(replay.reference_patch)
    existing = [p for p, d in changed.items() if "--- /dev/null" not in d]
    added = [p for p in changed if p not in existing]
    shown = files_at(repo.mirror, commit.parent, existing)
    regions = {path: hunk_regions(changed[path]) for path in existing}
    show_files(shown, regions, config.max_prompt_chars)  # too long to show: ask no model
    seed_text, seed = seed_for(GENERATOR, VERSION, replay.repo_id, replay.sha)
    statement, source, rejected = await _statement(replay, commit, llm, config, seed)
    if added:
        statement += "\n\nThe change adds these files: " + ", ".join(f"`{p}`" for p in added)
    workspace = Workspace(
        repo_id=repo.repo_id, origin=repo.origin, base=commit.parent, test_patch=replay.test_patch
    )
    lineage = Lineage(
        generator=GENERATOR,
        generator_version=VERSION,
        prompt_hash=STATEMENT_PROMPT.version,
        model=llm.model("generator"),
        seed=seed_text,
        knobs={
            "commit": replay.sha,
            "statement": source,
            **({"statement_rejected": rejected} if rejected else {}),
            "level": "base",
            "tests": "hidden",
        },
    )
    tests = (replay.fail_to_pass, replay.pass_to_pass)
    return code_task(
        KIND,
        statement,
        shown,
        replay.reference_patch,
        workspace,
        tests,
        lineage,
        regions,
        config.max_prompt_chars,
    )


def check_statement(statement: str) -> None:
    """A statement says something (a few words at least) and stays readable in length."""
    if len(statement.split()) < MIN_STATEMENT_WORDS:
        raise CheckFailure("statement_too_short")
    if len(statement) > MAX_STATEMENT_CHARS:
        raise CheckFailure("statement_too_long")


def hunk_regions(section: str) -> list[tuple[int, int]]:
    """The lines of the old file each hunk of a one-file diff section changes."""
    regions = []
    for match in HUNK.finditer(section):
        start, count = int(match.group(1)), int(match.group(2) or 1)
        regions.append((start, start + max(count, 1) - 1))
    return regions


async def _statement(
    replay: CommitReplay, commit: Commit, llm: LLMClient, config: CodeConfig, seed: int
) -> tuple[str, str, str]:
    """(statement, "generated", "") from the model, else (commit message, "commit_message",
    why the model's statement was not used)."""
    prompt = STATEMENT_PROMPT.render(
        message=commit.message.strip(),
        diff=replay.reference_patch[:MAX_DIFF_CHARS],
        tests=replay.test_patch[:MAX_TESTS_CHARS],
    )
    try:
        draft = await llm.structured(
            "generator",
            [{"role": "user", "content": prompt}],
            StatementDraft,
            max_tokens=config.statement_max_tokens,
            temperature=0.0,
            seed=seed,
            repairs=1,
        )
        check_statement(draft.statement)
        check_no_leak(draft.statement, replay.reference_patch)
        return draft.statement.strip(), "generated", ""
    except LLMError as error:
        if error.reason != "invalid_structured_output":
            raise  # transient: the commit is taken again next run
        rejected = error.reason
    except CheckFailure as failure:
        rejected = failure.reason
    check_no_leak(commit.message, replay.reference_patch)
    return commit.message.strip(), "commit_message", rejected
