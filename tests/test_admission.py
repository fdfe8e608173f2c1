"""A code task's admission gates (docs/reward-integrity.md, `UnitTests.self_check`): an outside
check, the reference passing 3 fresh runs, the empty and a do-nothing attempt scoring 0; each
failed gate is its own reason in the funnel."""

from __future__ import annotations

import asyncio

import pytest

from data.git import git
from data.repos import ingest_repo
from families.code_stages import inject_bugs
from judges.code_grading import edits_of
from judges.score import Score
from judges.unit_tests import FRESH_RUNS, UnitTests, do_nothing
from tests.conftest import make_context
from tests.test_bug_injection import make_repository


@pytest.fixture(scope="module")
def bug_task(tmp_path_factory):
    root = tmp_path_factory.mktemp("admission")
    repo = make_repository(root / "stockroom")
    ctx = make_context(root / "home", code={"max_bugs": 1})
    ingest_repo(str(repo), ctx.lake, ctx.config.home, ctx.run_id)
    inject_bugs(ctx)
    [task] = ctx.lake.records("tasks")
    return ctx, task


class Scripted(UnitTests):
    """Real checks and workspaces; the scores of the reference's runs given in turn (the seam:
    what a fresh run of the reference scores), every other attempt scored for real."""

    def __init__(self, real: UnitTests, gold_rewards: list[float]):
        super().__init__(real.mirrors, real.limits)
        self.gold_rewards = gold_rewards

    def score(self, task, edits):
        if all(e is not None for e in edits) and self.gold_rewards:
            reward = self.gold_rewards.pop(0)
            return Score(reward, "scripted")
        return super().score(task, edits)


def test_a_sound_task_passes_every_gate_and_says_so(bug_task):
    ctx, task = bug_task
    assert asyncio.run(ctx.unit_tests.self_check(task)) is None
    detail = ctx.unit_tests.admitted(task)
    assert detail.startswith("outside check: ") and "3 red-team attacks scored 0" in detail


def test_a_reference_that_fails_one_fresh_run_is_flaky(bug_task):
    ctx, task = bug_task
    failure = asyncio.run(Scripted(ctx.unit_tests, [1.0, 0.0, 1.0]).self_check(task))
    assert failure.reason == "reference_flaky" and failure.detail.startswith("2 of 3 runs")


def test_a_reference_that_fails_every_run_fails(bug_task):
    ctx, task = bug_task
    failure = asyncio.run(Scripted(ctx.unit_tests, [0.0] * FRESH_RUNS).self_check(task))
    assert failure.reason == "reference_fails"


def test_a_do_nothing_attempt_that_passes_keeps_the_task_out(bug_task):
    ctx, task = bug_task

    class Lenient(Scripted):
        def score(self, task, edits):
            if edits[0] is not None and edits[0].files:  # the do-nothing attempt: whole files
                return Score(1.0, "scripted")
            return super().score(task, edits)

    failure = asyncio.run(Lenient(ctx.unit_tests, []).self_check(task))
    assert failure.reason == "do_nothing_passes"
    # what it sends is the start's files with a comment added: nothing the tests could tell
    reference, _ = edits_of(task.answer, 1)
    files, _ = ctx.unit_tests._start(task, reference)
    [edits] = do_nothing(files, 1)
    assert edits.paths == reference[0].paths
    assert all(t.endswith("# nothing changed\n") for t in edits.files.values())


GREETING = {
    "pyproject.toml": '[project]\nname = "hello"\nversion = "0.1.0"\n',
    "hello/__init__.py": "",
    "hello/words.py": 'def greeting() -> str:\n    return "hello " + "world"\n',
    "tests/test_words.py": "from hello.words import greeting\n\n\n"
    'def test_greeting():\n    assert greeting() == "hello world"\n',
}


def test_a_task_whose_one_value_can_be_hard_coded_is_not_admitted(tmp_path):
    # one call, no argument to nudge: the tests' own value, hard-coded, passes the outside check
    repo = tmp_path / "hello"
    for name, text in GREETING.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=A", "-c", "user.email=a@b.example", "commit", "-qm", "hello")
    ctx = make_context(tmp_path / "home", code={"max_bugs": 1})
    ingest_repo(str(repo), ctx.lake, ctx.config.home, ctx.run_id)
    inject_bugs(ctx)
    [task] = ctx.lake.records("tasks")
    failure = asyncio.run(ctx.unit_tests.self_check(task))
    assert failure.reason == "red_team_scores"
    assert failure.detail.startswith("guess: the tests' expected values hard-coded")
