"""Commit-sequence tasks: a short run of consecutive replayed commits as ordered steps, each
with its own test checkpoint.

The start is the first commit's parent; step N asks for commit N's change (the statement of its
commit-replay task) and its checkpoint is that commit's hidden tests (its fail-to-pass and
pass-to-pass tests, run after its test patch is applied on what the steps before left). The
reference is the commits' source changes, one step each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from data.config import CodeConfig
from data.lake import Checkpoint, Commit, CommitReplay, Lineage, Task, Workspace
from data.prompts import load_prompt
from data.runtime.edits import split_diff
from generators.code_tasks import code_task, files_at, paths_at, statement_of
from generators.replay_tasks import RepoOrigin, hunk_regions

GENERATOR = "commit_sequence"
VERSION = "1"
PROMPT = load_prompt(__file__, "commit_sequence")


@dataclass(frozen=True)
class Link:
    """One step: the commit, what replaying it showed, and its commit-replay task."""

    commit: Commit
    replay: CommitReplay
    task: Task


def chains(commits: Sequence[Commit], usable: set[str], length: int) -> list[list[Commit]]:
    """Runs of `length` commits, each the parent of the next and all in `usable`, oldest first
    and not overlapping."""
    child = {}
    for commit in commits:
        child.setdefault(commit.parent, commit)  # a commit with two children: the first one
    taken: set[str] = set()
    runs = []
    for commit in sorted(commits, key=lambda c: (c.authored_at, c.sha)):
        run = [commit]
        while len(run) < length and run[-1].sha in child:
            run.append(child[run[-1].sha])
        if len(run) == length and all(c.sha in usable and c.sha not in taken for c in run):
            runs.append(run)
            taken.update(c.sha for c in run)
    return runs


def sequence_task(links: list[Link], repo: RepoOrigin, config: CodeConfig) -> Task:
    """The commit-sequence task of `links`; raises CheckFailure when its files cannot be
    shown."""
    base = links[0].commit.parent
    regions: dict[str, list[tuple[int, int]]] = {}
    for link in links:
        for path, section in split_diff(link.replay.reference_patch).items():
            regions.setdefault(path, hunk_regions(section))
    existing = paths_at(repo.mirror, base, list(regions))  # files a step adds are not shown
    regions = {path: lines for path, lines in regions.items() if path in existing}
    shown = files_at(repo.mirror, base, sorted(regions))
    steps = "\n\n".join(
        f"## Step {n}\n\n{statement_of(link.task)}" for n, link in enumerate(links, start=1)
    )
    statement = PROMPT.render(count=str(len(links)), steps=steps)
    answer = "\n\n".join(
        f"## Step {n}\n\n```diff\n{link.replay.reference_patch}```"
        for n, link in enumerate(links, start=1)
    )
    checkpoints = [
        Checkpoint(
            test_patch=link.replay.test_patch,
            fail_to_pass=link.replay.fail_to_pass,
            pass_to_pass=link.replay.pass_to_pass,
        )
        for link in links
    ]
    workspace = Workspace(repo_id=repo.repo_id, origin=repo.origin, base=base)
    lineage = Lineage(
        generator=GENERATOR,
        generator_version=VERSION,
        prompt_hash=PROMPT.version,
        model="",
        seed="/".join([GENERATOR, VERSION, repo.repo_id, *(link.commit.sha for link in links)]),
        knobs={
            "commits": "+".join(link.commit.sha for link in links),
            "steps": len(links),
            "level": "base",
            "tests": "hidden",
        },
    )
    return code_task(
        "commit_sequence",
        statement,
        shown,
        answer,
        workspace,
        ([], []),
        lineage,
        regions,
        config.max_prompt_chars,
        checkpoints,
    )
