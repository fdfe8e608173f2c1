"""Bug-fix tasks from a repository whose one commit carries no test change to replay: mutations
located with `ast` and applied over their node's span only, kept where tests fail, verified by
the gold self-check in the sandbox, calibrated and exported; the ladder's variants and a
sibling bug."""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path

import pytest

from data.export import export_taskset, read_tasks
from data.repos import git, ingest_repo
from data.runtime.sandbox import Completed
from data.runtime.test_run import TestRun
from families import export_kinds, family_of
from families.bug_injection import inject_bugs, pending_injections
from families.code_stages import replay_commits
from generators.bug_injection import KIND, LADDER, failure_output, make_variant
from generators.function_targets import targets
from generators.mutations import candidates, mutations
from sources import groupings
from tests.conftest import endpoints_for, make_context, repo_of, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle

PACKAGE = {
    "pyproject.toml": '[project]\nname = "stockroom"\nversion = "0.1.0"\n',
    "stockroom/__init__.py": "",
    "stockroom/levels.py": '''"""Stock levels and reorder decisions."""


def needs_reorder(on_hand: int, minimum: int) -> bool:
    """Whether stock has fallen to or below its minimum."""
    return on_hand <= minimum


def restock(on_hand: int, delivered: int) -> int:
    """The stock after a delivery."""
    total = on_hand
    total += delivered
    return total


def shortfall(on_hand: int, wanted: int) -> int:
    """How many units an order of `wanted` is short by (0 when stock covers it)."""
    if wanted > on_hand:
        return wanted - on_hand
    return 0


def is_listed(sku: str, catalogue: set[str]) -> bool:
    """Whether `sku` (any case) is in the catalogue."""
    return sku.upper() in catalogue and not sku.startswith("x")
''',
    "tests/test_levels.py": """from stockroom import levels
from stockroom.levels import is_listed, needs_reorder, restock


def test_reorder_at_the_minimum():
    assert needs_reorder(3, 3)
    assert not needs_reorder(4, 3)


def test_restock_adds_the_delivery():
    assert restock(2, 5) == 7


def test_shortfall():
    assert levels.shortfall(2, 5) == 3
    assert levels.shortfall(5, 2) == 0
    assert levels.shortfall(5, 5) == 0


def test_listed():
    assert is_listed("ab1", {"AB1"})
    assert not is_listed("zz9", {"AB1"})
""",
}


def make_repository(path: Path) -> Path:
    """A repository with a single commit: nothing in its history to replay."""
    for name, text in PACKAGE.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "init", "--quiet", "--initial-branch=main")
    git(path, "add", ".")
    identity = ["-c", "user.name=Dee Vance", "-c", "user.email=dee@stockroom.example"]
    git(path, *identity, "commit", "--quiet", "-m", "stock levels")
    return path


def changed_lines(patch: str) -> list[str]:
    """A patch's removed and added lines, their sign dropped."""
    lines = [line for line in patch.splitlines() if not line.startswith(("---", "+++"))]
    return [line[1:] for line in lines if line.startswith(("-", "+"))]


def test_a_mutation_replaces_its_node_span_and_nothing_else():
    source = PACKAGE["stockroom/levels.py"]
    by_name = {t.qualname: t for t in targets("stockroom/levels.py", source)}
    found = {m.description: m for m in mutations(source, by_name["needs_reorder"])}
    assert set(found) == {"`<=` became `<`"}
    mutated = found["`<=` became `<`"].apply(source)
    assert mutated == source.replace("on_hand <= minimum", "on_hand < minimum")
    assert found["`<=` became `<`"].subtle
    listed = {m.description for m in mutations(source, by_name["is_listed"])}
    assert listed == {"`in` became `not in`", "`and` became `or`", "`not` dropped"}
    assert {m.description for m in mutations(source, by_name["restock"])} == {"`+=` became `-=`"}
    shortfall = {m.description for m in mutations(source, by_name["shortfall"])}
    assert shortfall == {"`>` became `>=`", "`-` became `+`", "`0` became `1`"}


def test_positions_are_read_as_characters_and_brackets_survive():
    source = 'def f(a, b):\n    label = "größe"; return (a) < (b) and not (a == "é")\n'
    [target] = targets("m.py", source)
    found = {m.description: m.apply(source) for m in mutations(source, target)}
    assert found["`<` became `<=`"].endswith('return (a) <= (b) and not (a == "é")\n')
    assert found["`not` dropped"].endswith('return (a) < (b) and (a == "é")\n')
    assert found["`==` became `!=`"].endswith('not (a != "é")\n')
    for mutated in found.values():
        ast.parse(mutated)
    docstring_only = 'def g():\n    """3 < 4"""\n    return 1\n'
    [target] = targets("m.py", docstring_only)
    assert [m.description for m in mutations(docstring_only, target)] == ["`1` became `2`"]
    assert candidates(docstring_only, target, subtle=False) == []


@pytest.fixture(scope="module")
def bug_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("bugs")
    repo = make_repository(root / "stockroom")
    settings = {
        "code": {"max_bugs": 4},
        "calibrate": {"method": "fixed", "k": 2},
        "repair": {"max_steps": 0},
    }
    ctx = make_context(root / "home", **settings)
    ingest_repo(str(repo), ctx.lake, ctx.config.home, ctx.run_id)
    replayed = replay_commits(ctx)
    counts = inject_bugs(ctx)
    with FakeOpenAIServer(Oracle(code=dict(PACKAGE))) as server:
        run_llm_stages(ctx, endpoints_for(server))
    export = export_taskset(
        ctx.lake, "bugs", root / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    rows = read_tasks(export.path).to_pylist()
    return ctx, replayed, counts, rows


def test_a_repository_without_replayable_commits_yields_verified_bug_fix_tasks(bug_run):
    ctx, replayed, counts, rows = bug_run
    assert not ctx.lake.records("replays")  # its one commit has nothing to replay
    assert counts["inject:done:injected"] == 1 and counts["done:injected"] >= 3
    tasks = [t for t in ctx.lake.records("tasks") if t.kind == KIND]
    verify = {
        r["item_id"]: r["reason"]
        for r in ctx.lake.rows("SELECT * FROM status WHERE stage = 'verify'")
    }
    assert tasks and all(verify[t.task_id] == "gold_self_check_passed" for t in tasks)
    exported = [r for r in rows if r["kind"] == KIND]
    assert {r["task_id"] for r in exported} == {t.task_id for t in tasks}
    for row in exported:
        verifier, workspace = json.loads(row["verifier"]), json.loads(row["workspace"])
        assert verifier["fail_to_pass"] and verifier["pass_to_pass"]
        assert row["pass_rate"] is not None
        start, reference = workspace["start_patch"], row["answer"]
        assert changed_lines(start) == changed_lines(reference)[::-1]  # one way, then back
        assert len(changed_lines(start)) == 2  # one line taken out, its mutant put in
        assert "tests/" not in reference
        prompt = row["prompt"][1]["content"]
        assert all(f"`{test}`" in prompt for test in verifier["fail_to_pass"])
        assert "What the tests report" not in prompt  # the base level names the tests only
        assert json.loads(row["lineage"])["knobs"]["level"] == "base"


def test_a_second_run_makes_nothing_again(bug_run):
    ctx, *_ = bug_run
    assert pending_injections(ctx) == []
    assert inject_bugs(ctx) == {}


def test_each_level_of_the_ladder_can_be_made(bug_run):
    ctx, *_ = bug_run
    [task] = [
        t
        for t in ctx.lake.records("tasks")
        if t.kind == KIND and t.lineage.knobs["function"].endswith("::shortfall")
    ]
    repo = repo_of(ctx.lake, task)
    made = {}
    for level in LADDER.levels:
        if level.name != "base":
            made[level.name] = make_variant(task, level, "harder", repo, ctx.limits, 24_000)
    shown = made["output_shown"]
    assert shown.lineage.knobs["mutation"] == task.lineage.knobs["mutation"]  # the same bug
    assert "What the tests report" in shown.question and "assert" in shown.question
    assert "/tmp/" not in shown.question  # sandbox paths are made relative
    subtle = made["subtle"]
    assert subtle.lineage.knobs["subtlety"] == "subtle"
    assert subtle.lineage.knobs["mutation"] != task.lineage.knobs["mutation"]
    assert subtle.lineage.repair.path == ["base", "subtle"]
    two = made["two_functions"]
    assert two.lineage.knobs["also"] and two.lineage.knobs["also_mutation"]
    assert "two bugs, in two different functions" in two.question
    assert len(changed_lines(two.workspace.start_patch)) == 4


def test_a_sibling_is_another_bug_in_the_same_function(bug_run):
    ctx, *_ = bug_run
    task = next(
        t
        for t in ctx.lake.records("tasks")
        if t.kind == KIND and t.lineage.knobs["function"].endswith("::is_listed")
    )  # it has three plain mutation sites
    family = family_of(KIND)
    checkout = family.load_for_variants(ctx, [task])[task.task_id]
    sibling = asyncio.run(family.sibling(task, checkout, None, ctx))
    assert sibling.lineage.knobs["function"] == task.lineage.knobs["function"]
    assert sibling.lineage.knobs["mutation"] != task.lineage.knobs["mutation"]
    assert sibling.task_id != task.task_id


def test_a_node_failure_report_leaves_out_each_test_s_duration():
    """Node's spec reporter writes how long each test took after its name; a bug-fix task
    that quotes the report must read the same in a re-run (a re-run of `make run` once made
    parcelrate's bug fix another task, its prompt differing only in milliseconds)."""

    def report(first: str, second: str) -> str:
        stderr = (
            "✖ failing tests:\n\ntest at test/rates.test.js:6:1\n"
            f"✖ the first 500 g cost the base price ({first})\n"
            "  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:\n\n"
            "  450 !== 500 (a value in parentheses stays: (3ms)\n\n"
            f"  ✖ a nested test ({second})\n"
        )
        completed = Completed(["node"], 1, "", stderr, 0.1, False, True)
        return failure_output(TestRun({}, completed))

    shown = report("5.957022ms", "1.2s")
    assert shown == report("1.702613ms", "0.9s")
    assert "✖ the first 500 g cost the base price\n" in shown and "  ✖ a nested test" in shown
    assert "450 !== 500 (a value in parentheses stays: (3ms)" in shown
