"""A code task's admission gates (docs/reward-integrity.md, `UnitTests.self_check`): an outside
check, the reference passing 3 fresh runs, the empty and a do-nothing attempt scoring 0, tests
that kill a mutant of the reference, the red team scoring 0; each failed gate is its own reason
in the funnel, and every gate taken is recorded."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest

from data.lake import GATE_ORDER
from data.repos import checkout, git, ingest_repo
from data.runtime import test_runners
from data.runtime.code_grading import edits_of
from data.runtime.python_env import INSTALLER, copies_in, site_packages
from families.bug_injection import inject_bugs
from generators.mutations import mutants_of_change
from judges.score import Score
from judges.unit_tests import FRESH_RUNS, GateFailure, UnitTests, do_nothing
from tests.conftest import make_context
from tests.test_bug_injection import make_repository


def admission_failure(unit_tests: UnitTests, task, mutate=mutants_of_change) -> GateFailure | None:
    """Why `task` is kept out by `unit_tests`'s admission gates (None: it is admitted)."""
    return asyncio.run(unit_tests.self_check(task, mutate)).failure


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

    def fresh_runs(self, task, reference):
        checks, runs = super().fresh_runs(task, reference)
        assert len(runs) == len(self.gold_rewards) == FRESH_RUNS
        return checks, [Score(reward, "scripted") for reward in self.gold_rewards]


def test_a_sound_task_passes_every_gate_and_says_so(bug_task):
    ctx, task = bug_task
    admission = asyncio.run(ctx.unit_tests.self_check(task, mutants_of_change))
    assert admission.failure is None
    gates = {gate.gate: gate for gate in admission.gates}
    assert tuple(gates) == GATE_ORDER  # every gate taken, in order
    assert all(gate.passed and gate.task_id == task.task_id for gate in admission.gates)
    assert gates["fresh_runs"].share == 1.0
    # the bug's tests catch the bug put back, so they kill mutants of the reference
    assert gates["mutants"].share > 0 and gates["mutants"].detail.startswith("tests killed ")
    assert "outside check: " in admission.summary
    assert "4 red-team attacks ran and scored 0" in admission.summary


def test_tests_that_kill_no_mutant_keep_the_task_out(bug_task):
    ctx, task = bug_task

    def unchanged(before, after, most):  # mutants that change nothing: no test can kill one
        return [dict(after)] * most

    admission = asyncio.run(ctx.unit_tests.admit(task, unchanged))
    assert admission.failure.reason == "tests_kill_no_mutant"
    assert admission.gates[-1].gate == "mutants" and admission.gates[-1].share == 0.0
    assert admission.failure.detail == "its tests killed 0 of 3 mutants of the reference"


def test_a_gate_that_could_not_run_keeps_the_task_out_and_is_not_counted_as_passed(bug_task):
    ctx, task = bug_task

    def none(before, after, most):  # no mutant to try: the tests' strength is unmeasured
        return []

    admission = asyncio.run(ctx.unit_tests.admit(task, none))
    assert admission.failure.reason == "no_mutant_to_try"
    last = admission.gates[-1]
    assert (last.gate, last.passed, last.ran, last.share) == ("mutants", False, False, None)
    assert all(gate.ran and gate.passed for gate in admission.gates[:-1])


def test_a_variant_graded_alike_gets_its_parents_gates_without_taking_them_again(bug_task):
    ctx, task = bug_task
    taken = []

    class Counting(UnitTests):
        async def admit(self, task, mutate):
            taken.append(task.task_id)
            return await super().admit(task, mutate)

    unit_tests = Counting(ctx.unit_tests.mirrors, ctx.unit_tests.limits)
    first = asyncio.run(unit_tests.self_check(task, mutants_of_change))
    shown = task.model_copy(update={"task_id": "variant", "question": "Fix it. " + task.question})
    again = asyncio.run(unit_tests.self_check(shown, mutants_of_change))
    assert taken == [task.task_id]
    assert [g.task_id for g in again.gates] == ["variant"] * len(first.gates)
    assert [(g.gate, g.passed) for g in again.gates] == [(g.gate, g.passed) for g in first.gates]
    other = task.model_copy(update={"task_id": "other", "answer": task.answer + "\n"})
    asyncio.run(unit_tests.self_check(other, mutants_of_change))  # another reference: taken
    assert taken == [task.task_id, "other"]


def test_mutants_are_taken_in_the_functions_the_change_touched():
    before = {"m.py": "def kept(a):\n    return a < 1\n\n\ndef fixed(a):\n    return a > 1\n"}
    after = {"m.py": before["m.py"].replace("a > 1", "a > 1 and a != 7")}
    mutants = mutants_of_change(before, after, 5)
    assert mutants and len(mutants) <= 5
    for mutant in mutants:  # each differs from the reference inside `fixed` only
        assert mutant["m.py"] != after["m.py"]
        assert mutant["m.py"].split("def fixed")[0] == after["m.py"].split("def fixed")[0]
    assert mutants_of_change(after, after, 5) == []  # no change: no function touched


def test_a_function_without_operators_or_constants_still_gets_mutants():
    before = {"m.py": 'def name(user):\n    """The name."""\n    return user\n'}
    after = {
        "m.py": before["m.py"].replace(
            "return user", "first = user.strip()\n    return first.title()"
        )
    }
    mutants = [m["m.py"] for m in mutants_of_change(before, after, 3)]
    assert len(mutants) == 2
    assert after["m.py"].replace("return first.title()", "return None") in mutants
    assert after["m.py"].replace("first = user.strip()", "pass") in mutants
    script = {"m.js": "export function name(user) {\n  return user;\n}\n"}
    changed = {"m.js": script["m.js"].replace("return user;", "log(user);\n  return user.trim();")}
    made = [m["m.js"] for m in mutants_of_change(script, changed, 3)]
    assert changed["m.js"].replace("return user.trim();", "return undefined;") in made
    assert changed["m.js"].replace("log(user);", ";") in made


def test_a_reference_that_fails_one_fresh_run_is_flaky(bug_task):
    ctx, task = bug_task
    failure = admission_failure(Scripted(ctx.unit_tests, [1.0, 0.0, 1.0]), task)
    assert failure.reason == "reference_flaky" and failure.detail.startswith("2 of 3 runs")


def test_a_reference_that_fails_every_run_fails(bug_task):
    ctx, task = bug_task
    failure = admission_failure(Scripted(ctx.unit_tests, [0.0] * FRESH_RUNS), task)
    assert failure.reason == "reference_fails"


def test_a_do_nothing_attempt_that_passes_keeps_the_task_out(bug_task):
    ctx, task = bug_task

    class Lenient(Scripted):
        def score(self, task, edits):
            if edits[0] is not None and edits[0].files:  # the do-nothing attempt: whole files
                return Score(1.0, "scripted")
            return super().score(task, edits)

    failure = admission_failure(Lenient(ctx.unit_tests, [1.0] * FRESH_RUNS), task)
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


def test_a_task_whose_oracle_holds_no_unseen_input_is_not_admitted(tmp_path):
    # one call, no argument to nudge: the tests' own value, hard-coded, would pass the outside
    # check, so the outside check alone does not admit it
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
    failure = admission_failure(ctx.unit_tests, task)
    assert failure.reason == "no_unseen_input"
    assert (
        failure.detail
        == "its 1 calls are all inputs the tests show: a table of their values would pass"
    )


def test_a_task_whose_module_has_a_copy_in_the_environment_is_not_admitted(bug_task):
    ctx, task = bug_task

    class Shadowed(UnitTests):  # the seam: what the environment holds besides the tree
        def copies_elsewhere(self, task, checks):
            return "stockroom/levels.py"

    shadowed = Shadowed(ctx.unit_tests.mirrors, ctx.unit_tests.limits)
    failure = admission_failure(shadowed, task)
    assert failure.reason == "copy_in_environment"
    assert failure.detail.endswith("a copy of the target's module: stockroom/levels.py")
    assert ctx.unit_tests.copies_elsewhere(task, ctx.unit_tests.checks(task)) == ""


def test_the_installer_and_the_packages_it_vendors_are_not_in_the_environment(bug_task):
    ctx, task = bug_task
    with tempfile.TemporaryDirectory() as scratch:
        mirror = ctx.unit_tests.mirrors[task.workspace.repo_id]
        tree = checkout(mirror, task.workspace.base, Path(scratch) / "tree")
        env = test_runners.test_suite(tree).environment
    site = site_packages(env)
    assert not [p.name for p in site.iterdir() if p.name.split("-")[0] in INSTALLER]
    # setuptools vendors more_itertools, pip vendors rich: nothing of them is left
    assert copies_in(env, "more_itertools.more") == copies_in(env, "rich.console") == []
    assert copies_in(env, "packaging.version") == ["packaging/version.py"]  # pytest's own
