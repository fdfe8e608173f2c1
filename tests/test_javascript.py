"""Code tasks from the bundled JavaScript repository (`parcelrate`, tested with Node's test
runner): commit replay, function rebuild and bug fix through the same stages as Python, its
tests run in the sandbox with no network, every admission gate (the outside check and the red
team's Node attacks among them), calibration and export."""

from __future__ import annotations

import pytest

from data.export import NODE_REQUIREMENT, canonical_rows, export_taskset, project, read_tasks
from data.lake import GATE_ORDER
from data.repos import PARCELRATE, build_sample_repo, git, ingest_repo
from families import export_kinds
from families.bug_injection import inject_bugs
from families.code_stages import replay_commits
from families.function_rebuild import rebuild_functions
from flows.cli import main
from generators import bug_injection
from generators.function_targets import targets
from generators.mutations import candidates, mutations
from judges.redteam.node_attacks import NODE_ATTACKS
from judges.verifier_types import package_graders
from sources import groupings
from tests.conftest import endpoints_for, make_context, repo_of, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.test_code_tasks import graded_both_ways, red_team_replies
from tests.test_world_package import installed, needs_verifiers

PARTIAL_STEP = "test/rates.test.js::a partial step is charged as a whole one"


@pytest.fixture(scope="module")
def js_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("javascript")
    repo = build_sample_repo(root / "parcelrate", PARCELRATE)
    head = {p: (repo / p).read_text() for p in git(repo, "ls-files", "src").splitlines()}
    settings = {
        "code": {"max_functions": 1},
        "calibrate": {"method": "fixed", "k": 2},
        "repair": {"max_steps": 0},
    }
    ctx = make_context(root / "home", **settings)
    ingest_repo(str(repo), ctx.lake, ctx.config.home, ctx.run_id)
    counts = replay_commits(ctx) + rebuild_functions(ctx) + inject_bugs(ctx)
    with FakeOpenAIServer(Oracle(code=head)) as server:
        run_llm_stages(ctx, endpoints_for(server))
    export = export_taskset(
        ctx.lake, "js", root / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    rows = read_tasks(export.path).to_pylist()
    return ctx, counts, rows, export.path


def test_the_repository_is_read_as_javascript(js_run):
    ctx, counts, *_ = js_run
    [repo] = ctx.lake.rows("SELECT * FROM repos")
    assert repo["language"] == "javascript" and repo["n_commits"] == 6
    kinds = {c.message.splitlines()[0]: c.kind for c in ctx.lake.records("commits")}
    assert kinds["Charge a partial weight step as a whole one"] == "source_and_tests"
    assert counts["repo_tests:done:tests_run"] == 1
    assert counts["inject:done:injected"] == 1


def test_replayed_commits_have_their_node_tests_as_fail_to_pass(js_run):
    ctx, *_ = js_run
    replays = {r.sha: r for r in ctx.lake.records("replays")}
    commits = {c.message.splitlines()[0]: c.sha for c in ctx.lake.records("commits")}
    assert len(replays) == 5  # every commit after the first
    fix = replays[commits["Charge a partial weight step as a whole one"]]
    assert fix.fail_to_pass == [PARTIAL_STEP]
    assert "test/rates.test.js::the first 500 g cost the base price" in fix.pass_to_pass
    assert "src/rates.js" in fix.reference_patch and "test/" not in fix.reference_patch
    zones = replays[commits["Add shipping zones by destination country"]]
    assert zones.fail_to_pass == sorted(
        f"test/zones.test.js::{name}"
        for name in (
            "the home country is zone 1",
            "neighbours and the rest of Europe",
            "every other country is zone 4",
            "a code that is not two letters is refused",
        )
    )


def test_javascript_tasks_pass_every_admission_gate_and_are_exported(js_run):
    # a pass rests on the outside check: the tests' calls into the tree's exports, recorded on
    # the reference and replayed on the attempt without its tests (docs/reward-integrity.md)
    ctx, _, rows, _ = js_run
    rows_ = ctx.lake.rows("SELECT * FROM status WHERE stage = 'verify'")
    verify = {r["item_id"]: r for r in rows_}
    tasks = ctx.lake.records("tasks")
    for kind in ("commit_replay", "function_rebuild", "bug_fix"):
        admitted = [t for t in tasks if t.kind == kind and t.task_id in verify]
        assert any(verify[t.task_id]["reason"] == "gold_self_check_passed" for t in admitted), kind
    red_team = "SELECT task_id FROM gates WHERE gate = 'red_team' AND passed"
    passed = {g["task_id"] for g in ctx.lake.rows(red_team)}
    assert passed
    gates = ctx.lake.rows("SELECT task_id, gate, passed, ran, detail FROM gates")
    for task_id in passed:
        own = {g["gate"]: g for g in gates if g["task_id"] == task_id}
        assert set(own) == set(GATE_ORDER) and all(g["passed"] and g["ran"] for g in own.values())
        assert own["red_team"]["detail"] == "4 red-team attacks ran and scored 0"
    exported = {row["kind"] for row in rows}
    assert {"commit_replay", "function_rebuild", "bug_fix"} <= exported
    rebuild = next(t for t in tasks if t.kind == "function_rebuild")
    assert "```javascript\n// file: src/" in rebuild.question
    assert 'it is now only `throw new Error("not implemented");`' in rebuild.question
    assert all(t.startswith("test/") for t in rebuild.verifier.fail_to_pass)


@pytest.mark.full
def test_every_class_of_the_node_red_team_runs_and_scores_0(js_run, capsys):
    ctx, *_ = js_run
    code = main(["redteam", "--home", str(ctx.config.home), "--quick", "--wall-s", "15"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"function_rebuild {NODE_ATTACKS[0].name}" in printed
    classes = {attack.kind for attack in NODE_ATTACKS}
    assert len(classes) == 13 and all(f"  {kind}\n" in printed for kind in classes), printed
    assert printed.rstrip().endswith(" 0 scored, 0 not shown to have run"), printed


@pytest.mark.full
@needs_verifiers
def test_the_package_grades_javascript_completions_as_taskfoundry_does(js_run, tmp_path):
    """The reference, the empty reply and the red team's admission attacks score the same
    through the exported verifiers package (its own copy of the runtime: the Node recorder,
    replay and runner) as through taskfoundry's verifier, for a task of each code kind."""
    ctx, _, _, version = js_run
    tasks = {t["task_id"]: t for t in canonical_rows(version)}
    chosen = {t["kind"]: task_id for task_id, t in sorted(tasks.items()) if t["workspace"]}
    records = [t for t in ctx.lake.records("tasks") if t.task_id in chosen.values()]
    projection = project(version, "verifiers", ctx.lake, graders=package_graders())
    package = projection.path / "taskset"
    assert NODE_REQUIREMENT in (package / "pyproject.toml").read_text()
    env = installed(package, tmp_path / "package")
    graded = [
        (task, {"reference": task.answer, "empty": ""} | red_team_replies(ctx, task))
        for task in records
    ]
    expected, figures = graded_both_ways(ctx, version, graded, env, tmp_path)
    assert figures["rewards"] == expected
    assert {r["reference"] for r in expected.values()} == {1.0}
    assert {v for r in expected.values() for k, v in r.items() if k != "reference"} == {0.0}


def test_a_javascript_bug_at_its_easiest_level_shows_what_node_reports(js_run):
    ctx, *_ = js_run
    task = next(t for t in ctx.lake.records("tasks") if t.kind == "bug_fix")
    shown = bug_injection.make_variant(
        task,
        bug_injection.LADDER.level("output_shown"),
        "easier",
        repo_of(ctx.lake, task),
        ctx.limits,
        24_000,
    )
    assert shown.lineage.knobs["mutation"] == task.lineage.knobs["mutation"]
    report = shown.question.split("What the tests report:")[1]
    assert "✖ " in report and "test at test/" in report  # the failing tests, paths relative
    assert "sandbox-" not in report


def test_function_bodies_are_found_in_javascript_sources():
    source = """/** Adds. */
export function add(a, b) {
  const sum = a + b;
  return sum;
}

export const twice = (x) => x * 2;

const half = function (x) {
  return x / 2;
};

export default class Meter {
  constructor() {
    this.total = 0;
  }

  read() { return this.total; }

  record(value) {
    throw new Error("todo");
  }
}
"""
    found = {t.qualname: t for t in targets("src/meter.js", source)}
    assert set(found) == {"add", "half", "Meter.constructor"}  # the others have no lines of
    add = found["add"]  # their own, or only a placeholder
    assert (add.def_start, add.body_start, add.end, add.indent) == (2, 3, 4, "  ")
    assert found["Meter.constructor"].is_method
    with pytest.raises(SyntaxError):
        targets("src/broken.js", "export function (")


def test_a_javascript_mutation_replaces_its_operator_or_literal_and_nothing_else():
    source = """export function fee(grams, zone) {
  const label = 'größe';
  if (grams <= 500 && !zone.free) {
    return zone.base + 1;
  }
  return true;
}
"""
    [target] = targets("src/fee.js", source)
    found = {m.description: m for m in mutations(source, target)}
    assert set(found) == {
        "`<=` became `<`",
        "`500` became `501`",
        "`&&` became `||`",
        "`!` dropped",
        "`+` became `-`",
        "`1` became `2`",
        "`true` became `false`",
    }
    assert found["`<=` became `<`"].apply(source) == source.replace("<= 500", "< 500")
    assert found["`!` dropped"].apply(source) == source.replace("!zone", "zone")
    assert found["`<=` became `<`"].subtle and not found["`&&` became `||`"].subtle
    plain = candidates(source, target, subtle=False)
    assert {m.description for m in plain} == {
        "`&&` became `||`",
        "`!` dropped",
        "`+` became `-`",
        "`true` became `false`",
    }
