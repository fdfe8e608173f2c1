"""Commit replay, working backwards from a real commit: the parent state is the start, the
commit is a known-reachable end state, and the commit's own tests tell the two apart.

For a commit that changes source and tests, the tests are run twice in the sandbox: at the
parent with the commit's test files applied (the task's start), and at the commit itself.
Fail-to-pass tests (F2P) pass only at the commit; pass-to-pass tests (P2P) pass at both. The
reference patch is the commit's change to non-test files. Gold self-check: the reference patch
applied to the start makes every F2P and P2P test pass, while the start itself (the empty
patch) fails every F2P test; a commit that does not hold up is rejected with the reason.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from data.lake import Commit, CommitReplay
from data.repos import checkout, git
from data.runtime.edits import apply_patch
from data.runtime.python_env import EnvError
from data.runtime.sandbox import Limits, Sandbox
from data.runtime.test_run import TestRun
from data.runtime.test_runners import TestSuite, test_suite


@dataclass(frozen=True)
class Unusable:
    reason: str
    detail: str = ""


def start_state(mirror: Path, commit: Commit, dest: Path) -> Path:
    """The parent's tree with the commit's test files as the commit has them."""
    return checkout(mirror, commit.parent, dest, tests_from=commit)


def unreplayable(kind: str, parent: str) -> Unusable | None:
    """Why a commit of this kind and parent cannot be replayed, known without running anything
    (it needs a parent and a change to both source and tests), or None."""
    if kind != "source_and_tests":
        return Unusable("not_source_and_tests", kind)
    if not parent:
        return Unusable("root_commit")
    return None


def analyse(commit: Commit, mirror: Path, limits: Limits) -> CommitReplay | Unusable:
    """Run the commit's tests before and after it in the sandbox and check the gold patch;
    the environment is the one the commit's own tree asks for (`test_suite`)."""
    unusable = unreplayable(commit.kind, commit.parent)
    if unusable is not None:
        return unusable
    tests = [f.path for f in commit.files if f.is_test]
    sources = [f.path for f in commit.files if not f.is_test]
    reference, test_patch = _diff(mirror, commit, sources), _diff(mirror, commit, tests)
    with tempfile.TemporaryDirectory(prefix="foundry-replay-") as scratch:
        start = start_state(mirror, commit, Path(scratch) / "start")
        end = checkout(mirror, commit.sha, Path(scratch) / "end")
        suite = _suite_for(end)
        if isinstance(suite, Unusable):
            return suite
        with Sandbox(start, limits) as sandbox:
            before = suite.run(sandbox)
        with Sandbox(end, limits) as sandbox:
            after = suite.run(sandbox)
        if not after.passed():
            return Unusable("tests_do_not_run", _why(after))
        f2p = sorted(after.passed() - before.passed())
        p2p = sorted(after.passed() & before.passed())
        if not f2p:
            return Unusable("no_fail_to_pass", f"{len(p2p)} tests pass before and after")
        with Sandbox(start, limits) as sandbox:
            rejected = apply_patch(sandbox, "reference.patch", reference)
            gold = suite.run(sandbox, f2p + p2p) if rejected is None else None
        broken = sorted(set(f2p + p2p) - (gold.passed() if gold else set()))
        if broken:
            return Unusable("gold_patch_fails", ", ".join(broken[:5]))
    return CommitReplay(
        repo_id=commit.repo_id,
        sha=commit.sha,
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        reference_patch=reference,
        test_patch=test_patch,
        tests_before=len(before.outcomes),
        tests_after=len(after.outcomes),
    )


def tests_at(mirror: Path, rev: str, limits: Limits) -> TestRun | Unusable:
    """The whole suite run at `rev` in the sandbox: the check that a repository's tests run
    at all, before any of its commits is replayed."""
    with tempfile.TemporaryDirectory(prefix="foundry-check-") as scratch:
        tree = checkout(mirror, rev, Path(scratch) / "tree")
        suite = _suite_for(tree)
        if isinstance(suite, Unusable):
            return suite
        with Sandbox(tree, limits) as sandbox:
            run = suite.run(sandbox)
    return run if run.passed() else Unusable("tests_do_not_run", _why(run))


def _suite_for(tree: Path) -> TestSuite | Unusable:
    """The test suite of `tree` with the environment it asks for, or why there is none."""
    try:
        return test_suite(tree)
    except EnvError as error:
        return Unusable("dependencies_unavailable", error.detail)


def _diff(mirror: Path, commit: Commit, paths: list[str]) -> str:
    return git(mirror, "diff", "--no-color", "--binary", commit.parent, commit.sha, "--", *paths)


def _why(run: TestRun) -> str:
    if run.tampered:
        return f"tampered: {run.tampered}"
    last = (run.completed.stderr or run.completed.stdout).strip().splitlines()
    reason = "timed out" if run.completed.timed_out else f"exit {run.completed.exit_code}"
    return f"{reason}: {last[-1] if last else 'no output'}"
