"""Code tasks end to end on the bundled sample repository, with the oracle as every model:
commit replay (statements, leak check, hidden tests) and function rebuild, the gold self-check
in the sandbox, calibration by running the tests, and the export's code columns."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from data.export import (
    canonical_rows,
    export_taskset,
    formats,
    project,
    read_tasks,
    taskset_id,
    write_rl_toml,
)
from data.lake import Task, Workspace, format_funnel, funnel
from data.repos import build_sample_repo, checkout, git, ingest_repo
from data.runtime import sandbox
from data.runtime.edits import file_diff, parse_edits
from data.runtime.workspace_bundle import bundle_name, unpack
from families import export_kinds, family_of
from families.code import CodeFamily
from families.code_stages import replay_commits
from families.function_rebuild import pending_rebuilds, rebuild_functions
from families.stage import StageContext
from flows.cli import main
from generators.checks import CheckFailure, added_lines, check_no_leak
from generators.code_tasks import show_files
from generators.function_rebuild import (
    LADDER,
    blanked,
    call_sites,
    make_variant,
    rebuild_tasks,
)
from generators.function_targets import targets
from generators.replay_tasks import hunk_regions
from harnesses.workspace import files_at_start
from judges.redteam.suites import admission_attacks_for
from judges.unit_tests import unit_test_reward
from judges.verifier_types import package_graders
from sources import groupings
from tests.conftest import endpoints_for, make_context, repo_of, run_llm_stages
from tests.exported_files import machine_paths_in, projected_rows, this_machines_paths
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.test_admission import admission_failure
from tests.test_world_package import (
    VERIFIERS_PYTHON,
    installed,
    needs_verifiers,
    verifiers_figures,
    verifiers_run,
)

SETTINGS = {
    "code": {"max_functions": 2},
    "calibrate": {"method": "fixed", "k": 4},
    "sandbox": {"wall_s": 120},
    "repair": {"max_steps": 0},
}


def sample_code_run(root: Path, settings: dict, *sandbox_stages: Callable[[StageContext], Counter]):
    """A fake run over the sample repository under `settings`, the oracle as every model: its
    commits replayed, then `sandbox_stages` (rebuild, inject, ...), then every LLM stage;
    (context, repository)."""
    repo = build_sample_repo(root / "ledgerline")
    head = {p: (repo / p).read_text() for p in git(repo, "ls-files", "src").splitlines()}
    ctx = make_context(root / "home", **settings)
    ingest_repo(str(repo), ctx.lake, ctx.config.home, ctx.run_id)
    replay_commits(ctx)
    for stage in sandbox_stages:
        stage(ctx)
    with FakeOpenAIServer(Oracle(code=head)) as server:
        run_llm_stages(ctx, endpoints_for(server))
    return ctx, repo


@pytest.fixture(scope="module")
def code_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("code")
    ctx, repo = sample_code_run(root, SETTINGS, rebuild_functions)
    export = export_taskset(
        ctx.lake, "code", root / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    rows = read_tasks(export.path).to_pylist()
    return ctx, repo, rows


@pytest.fixture(scope="module")
def code_version(code_run, tmp_path_factory) -> Path:
    """The code run's taskset exported again, where only this module's tests add to it."""
    ctx, _, _ = code_run
    root = tmp_path_factory.mktemp("code-version")
    return export_taskset(ctx.lake, "code", root, kinds=export_kinds(), groupings=groupings()).path


def statuses(ctx, stage):
    return {r["item_id"]: r for r in ctx.lake.rows(f"SELECT * FROM status WHERE stage = '{stage}'")}


def test_both_kinds_are_exported_with_their_workspace_and_tests(code_run):
    ctx, repo, rows = code_run
    kinds = {row["kind"] for row in rows}
    assert kinds == {"commit_replay", "function_rebuild", "commit_sequence"}
    for row in rows:
        verifier, workspace = json.loads(row["verifier"]), json.loads(row["workspace"])
        assert verifier["type"] == "unit_tests"
        assert verifier["fail_to_pass"] or all(c["fail_to_pass"] for c in verifier["checkpoints"])
        assert row["repo"] == workspace["origin"] == repo.name  # not the operator's path
        assert row["base_revision"] == workspace["base"] and len(row["base_revision"]) == 40
        assert row["answer"].startswith(("--- a/src/", "diff --git", "## Step 1"))
        assert "tests/" not in row["answer"]  # the reference patch never touches the tests
        shows = "# file: " in row["prompt"][1]["content"]
        assert row["prompt"][0]["role"] == "system"
        assert shows or "The change adds these files" in row["prompt"][1]["content"]
    # each task's share of mutants its tests kill is its admission gate's figure
    sql = "SELECT task_id, share FROM gates WHERE gate = 'mutants' AND passed"
    killed = {gate["task_id"]: gate["share"] for gate in ctx.lake.rows(sql)}
    assert all(row["mutants_killed"] == killed[row["task_id"]] for row in rows)
    assert any(row["mutants_killed"] for row in rows)


def test_commit_replay_hides_the_commits_tests_until_scoring(code_run):
    ctx, repo, rows = code_run
    replays = [r for r in rows if r["kind"] == "commit_replay"]
    replay = next(r for r in replays if "refund" in r["prompt"][1]["content"].lower())
    workspace = Workspace.model_validate_json(replay["workspace"])
    assert "+def test_refunds_reduce_their_category" in workspace.test_patch
    assert "test_refunds" not in replay["prompt"][1]["content"]
    parent = git(repo, "rev-parse", f"{json.loads(replay['lineage'])['knobs']['commit']}^").strip()
    assert workspace.base == parent


def test_statements_never_copy_an_added_line_and_fall_back_to_the_message(code_run):
    ctx, _, _ = code_run
    tasks = [t for t in ctx.lake.records("tasks") if t.kind == "commit_replay"]
    sources = {t.lineage.knobs["statement"] for t in tasks}
    assert sources == {"generated", "commit_message"}
    for task in tasks:
        statement = task.question.split("The files that matter")[0]
        check_no_leak(statement, task.answer)  # raises on a leak
    fallbacks = [t for t in tasks if t.lineage.knobs["statement"] == "commit_message"]
    assert len(fallbacks) == 1 and "currency" in fallbacks[0].question.lower()
    assert fallbacks[0].lineage.knobs["statement_rejected"] == "statement_leaks_patch"


def test_every_code_task_passed_the_gold_self_check(code_run):
    ctx, _, rows = code_run
    verify = statuses(ctx, "verify")
    code_tasks = [t for t in ctx.lake.records("tasks") if isinstance(family_of(t.kind), CodeFamily)]
    assert code_tasks and all(
        verify[t.task_id]["reason"] == "gold_self_check_passed" for t in code_tasks
    )
    task = next(t for t in code_tasks if t.kind == "commit_replay")
    broken = task.model_copy(update={"answer": task.answer.replace("+", "+# ", 1)})
    assert admission_failure(ctx.unit_tests, task) is None
    assert admission_failure(ctx.unit_tests, broken).reason == "reference_fails"
    easy = task.model_copy(
        update={"verifier": task.verifier.model_copy(update={"fail_to_pass": []})}
    )
    # without its fail-to-pass tests no call tells the start from the reference
    assert admission_failure(ctx.unit_tests, easy).reason == "no_outside_check"


def test_calibration_runs_the_tests_on_each_attempt(code_run):
    ctx, _, rows = code_run
    rebuilds = [r for r in rows if r["kind"] == "function_rebuild"]
    assert rebuilds and all(r["pass_n"] == 4 and r["pass_rate"] == 0.5 for r in rebuilds)
    attempts = ctx.lake.rows(
        "SELECT a.* FROM attempts a JOIN tasks t USING (task_id) WHERE t.kind = 'function_rebuild'"
    )
    assert {a["harness"] for a in attempts} == {"code_single_turn"}
    assert {a["reward"] for a in attempts} == {0.0, 1.0}
    assert all("fail-to-pass" in a["reason"] for a in attempts)


def test_an_attempt_that_edits_the_tests_gains_nothing(code_run):
    ctx, _, _ = code_run
    task = next(t for t in ctx.lake.records("tasks") if t.kind == "function_rebuild")
    fail_to_pass = task.verifier.fail_to_pass[0].split("::")[0]
    reply = f"```python\n# file: {fail_to_pass}\ndef test_nothing():\n    pass\n```"
    reply += f"\n```python\n# file: {task.workspace.files[0]}\nx = 1\n```"
    score = asyncio.run(ctx.unit_tests.grade(task, reply))
    assert score.reward == 0.0 and "ignored edits to tests" in score.why


def test_the_reference_fix_with_code_that_walks_the_frames_scores_nothing(code_run):
    ctx, _, _ = code_run
    tasks = [t for t in ctx.lake.records("tasks") if t.kind == "commit_replay"]
    walker = "import sys\n\nFRAME = sys._getframe()\n"
    for task in tasks:
        beside = Path(parse_edits(task.answer).paths[0]).with_name("_walk.py")  # a source folder
        reply = f"{task.answer}\n```python\n# file: {beside}\n{walker}```"
        score = asyncio.run(ctx.unit_tests.grade(task, reply))
        assert score.reward == 0.0 and score.why.startswith("tampered: frame walking: `_getframe`")
    assert tasks and asyncio.run(ctx.unit_tests.grade(tasks[0], tasks[0].answer)).reward == 1.0


def test_a_rerun_finds_nothing_to_do(code_run):
    ctx, _, _ = code_run
    before = len(ctx.lake.records("tasks"))
    again = make_context(ctx.config.home, run_id="run-2", **SETTINGS)
    assert not replay_commits(again) and not rebuild_functions(again)
    with FakeOpenAIServer(Oracle()) as server:
        assert not run_llm_stages(again, endpoints_for(server))
    assert len(again.lake.records("tasks")) == before


def test_stats_show_the_code_stages(code_run):
    ctx, _, _ = code_run
    text = format_funnel(funnel(ctx.lake))
    assert "describe" in text and "rebuild" in text
    assert "code_single_turn" in text


# --- the pieces, without the sandbox -------------------------------------------------------

SOURCE = '''
def covered(x):
    """Doubles."""
    y = x * 2
    return y


def one_liner(x): return x


def placeholder():
    """Not written yet."""
    raise NotImplementedError


class Box:
    def size(self):
        return len(self.items)
'''


def test_targets_skip_placeholders_and_one_line_bodies():
    found = {t.qualname: t for t in targets("pkg/m.py", SOURCE)}
    assert set(found) == {"covered", "Box.size"}
    stub = blanked(SOURCE, found["covered"])
    assert '    """Doubles."""\n    raise NotImplementedError\n' in stub and "y = x" not in stub
    assert "Doubles" not in blanked(SOURCE, found["covered"], keep_docstring=False)


def test_call_sites_name_the_lines_that_call_a_function():
    target = next(t for t in targets("pkg/m.py", SOURCE) if t.name == "size")
    sites = call_sites(target, {"pkg/use.py": "n = box.size()\nsize(3)\n"})
    assert sites == ["pkg/use.py:1: n = box.size()"]


def test_the_leak_check_looks_at_added_lines_only():
    patch = file_diff("m.py", "total = 0\n", "total = sum(entry.amount for entry in entries)\n")
    assert added_lines(patch) == ["total = sum(entry.amount for entry in entries)"]
    check_no_leak("Sum the amounts of the entries; total = 0 is wrong.", patch)
    with pytest.raises(CheckFailure):
        check_no_leak("Use total = sum(entry.amount  for entry in entries)", patch)


@pytest.mark.full
def test_run_with_a_repository_through_the_cli(tmp_path, monkeypatch, capsys):
    repo = build_sample_repo(tmp_path / "ledgerline")
    config = tmp_path / "foundry.toml"
    config.write_text(
        "[code]\nmax_functions = 2\nmax_bugs = 1\nmax_replays = 2\n"
        "[calibrate]\nmethod = 'fixed'\nk = 2\n"
    )
    home = tmp_path / "home"
    with FakeOpenAIServer(Oracle()) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        assert main(["run", "--home", str(home), "--config", str(config), "--repo", str(repo)]) == 0
    manifest = json.loads((home / "tasksets" / "docqa" / "latest" / "manifest.json").read_text())
    kinds = {"commit_replay": 2, "commit_sequence": 1, "function_rebuild": 2, "bug_fix": 1}
    assert manifest["by_kind"] == kinds
    assert main(["stats", "--home", str(home)]) == 0
    assert "code tasks: function_rebuild" in capsys.readouterr().out


def rebuilt(repo, limits, *endings: str) -> list[Task]:
    """The base-level rebuild tasks of the functions whose names end with `endings`, in that
    order; the repository's candidates are built (each tried in the sandbox) only until every
    one is found."""
    found: dict[str, Task] = {}
    for made in rebuild_tasks(repo, limits, 30, 24_000):
        name = made.lineage.knobs["function"] if isinstance(made, Task) else ""
        found |= {end: made for end in endings if name.endswith(end)}
        if len(found) == len(endings):
            return [found[end] for end in endings]
    raise AssertionError(f"no rebuild task for {sorted(set(endings) - set(found))}")


def test_the_function_rebuild_ladder_in_the_sandbox(code_run):
    ctx, _, _ = code_run
    any_task = next(t for t in ctx.lake.records("tasks") if t.kind == "function_rebuild")
    repo = repo_of(ctx.lake, any_task)
    task, init = rebuilt(repo, ctx.limits, "::parse_line", "ParseError.__init__")
    assert task.lineage.knobs["level"] == "base" and "These tests" not in task.question

    def variant(level, direction):
        return make_variant(task, LADDER.level(level), direction, repo, ctx.limits, 24_000)

    shown = variant("with_tests", "easier")
    assert "These tests must pass:" in shown.question and "def test_" in shown.question
    assert shown.lineage.repair.path == ["base", "with_tests"]
    assert shown.verifier == task.verifier and shown.task_id != task.task_id

    bare = variant("no_docstring", "harder")
    assert "One ledger line as an entry." in task.question
    assert "One ledger line as an entry." not in bare.question
    assert "One ledger line as an entry." in bare.answer  # the reference puts it back

    pair = variant("two_functions", "harder")
    assert pair.lineage.knobs["also"] and "bodies of" in pair.question
    assert set(pair.verifier.fail_to_pass) >= set(task.verifier.fail_to_pass)
    for made in (shown, bare, pair):
        assert admission_failure(ctx.unit_tests, made) is None

    with pytest.raises(CheckFailure, match="no_docstring_to_drop"):
        make_variant(init, LADDER.level("no_docstring"), "harder", repo, ctx.limits, 24_000)


def test_a_too_hard_function_moves_one_level_easier(tmp_path):
    repo = build_sample_repo(tmp_path / "ledgerline")
    settings = {**SETTINGS, "code": {"max_functions": 1}, "repair": {"max_steps": 1}}
    ctx = make_context(tmp_path / "home", **settings)
    ingest_repo(str(repo), ctx.lake, ctx.config.home, ctx.run_id)
    rebuild_functions(ctx)
    with FakeOpenAIServer(Oracle()) as server:  # a solver that never edits a file
        run_llm_stages(ctx, endpoints_for(server))
    tasks = {t.task_id: t for t in ctx.lake.records("tasks")}
    variant = next(t for t in tasks.values() if t.lineage.repair)
    assert variant.lineage.repair.path == ["base", "with_tests"]
    assert "These tests must pass:" in variant.question
    verify, calibrate = statuses(ctx, "verify"), statuses(ctx, "calibrate")
    assert verify[variant.task_id]["reason"] == "gold_self_check_passed"
    assert calibrate[variant.task_id]["reason"] == "too_hard"
    rows = read_tasks(
        export_taskset(
            ctx.lake, "code", tmp_path / "out", kinds=export_kinds(), groupings=groupings()
        ).path
    ).to_pylist()
    assert [r["task_id"] for r in rows] == [variant.task_id]  # one task per family


def test_a_long_file_is_shown_as_excerpts_around_its_regions():
    text = "".join(f"line {n}\n" for n in range(1, 401))
    shown = show_files({"pkg/big.py": text}, {"pkg/big.py": [(100, 101), (120, 125)]}, 2000)
    assert shown.count("# file: pkg/big.py (excerpt: lines 70-155 of 400)") == 1
    assert "line 69\n" not in shown and "line 155\n" in shown and "line 156" not in shown
    assert show_files({"a.py": "x = 1\n"}, {}, 2000) == "```python\n# file: a.py\nx = 1\n```"
    with pytest.raises(CheckFailure, match="files_too_long"):
        show_files({"pkg/big.py": text}, {"pkg/big.py": [(1, 400)]}, 2000)


def test_hunk_regions_are_the_old_lines_each_hunk_changes():
    diff = file_diff(
        "m.py",
        "".join(f"{n}\n" for n in range(50)),
        "x\n" + "".join(f"{n}\n" for n in range(1, 50)),
    )
    assert hunk_regions(diff) == [(1, 4)]


def test_commit_sequences_have_a_checkpoint_per_step(code_run):
    ctx, _, rows = code_run
    sequences = [t for t in ctx.lake.records("tasks") if t.kind == "commit_sequence"]
    assert len(sequences) == 3  # the six replayed commits, two by two
    verify = statuses(ctx, "verify")
    task = sequences[0]
    assert verify[task.task_id]["reason"] == "gold_self_check_passed"
    assert len(task.verifier.checkpoints) == 2 and "## Step 2" in task.question
    assert all(point.fail_to_pass for point in task.verifier.checkpoints)
    first_only = task.answer.split("## Step 2")[0]
    half = asyncio.run(ctx.unit_tests.grade(task, first_only))
    assert half.reward == 0.5 and half.why.startswith("1/2 checkpoints")
    assert asyncio.run(ctx.unit_tests.grade(task, task.answer)).reward == 1.0
    assert any(r["kind"] == "commit_sequence" for r in rows)


def test_the_trainer_reward_runs_a_code_tasks_tests_in_the_sandbox(code_run):
    ctx, _, rows = code_run
    reward = unit_test_reward(ctx.unit_tests)
    task = next(r for r in rows if r["kind"] == "function_rebuild")
    doc_spec = json.dumps({"type": "exact_or_f1"})
    scores = reward(
        prompts=[task["prompt"]] * 2 + [[{"role": "user", "content": "q"}]],
        completions=[[{"role": "assistant", "content": task["answer"]}], "no patch here", "x"],
        verifier=[task["verifier"], task["verifier"], doc_spec],
        workspace=[task["workspace"], task["workspace"], None],
        kind=["function_rebuild", "function_rebuild", "doc_qa"],
        solution=[task["answer"], task["answer"], "x"],
    )
    assert scores == [1.0, 0.0, None]


def test_code_rollouts_that_passed_become_sft_transcripts(code_run, code_version):
    ctx, _, rows = code_run
    sft = project(code_version, "sft", ctx.lake, graders=package_graders())
    examples = projected_rows(sft.path)
    passed = ctx.lake.rows(
        "SELECT count(DISTINCT (task_id, response)) AS n FROM attempts WHERE reward = 1"
        " AND list_contains(?, task_id)",
        [[r["task_id"] for r in rows]],
    )
    assert sft.rows == len(examples) == passed[0]["n"] > 0
    by_id = {r["task_id"]: r for r in rows}
    for example in examples:
        prompt = by_id[example["task_id"]]["prompt"]
        said = [{"role": m["role"], "content": m["content"]} for m in example["messages"]]
        assert said[: len(prompt)] == prompt
        assert example["messages"][-1]["role"] == "assistant" and example["reward"] == 1.0
        assert parse_edits(example["messages"][-1]["content"]).paths  # the whole reply


def listing(root: Path) -> dict[str, tuple]:
    """Every entry under `root`: a symlink's target, a file's bytes and executable bit."""
    entries: dict[str, tuple] = {}
    for path in root.rglob("*"):
        if path.is_symlink():
            entries[path.relative_to(root).as_posix()] = ("link", os.readlink(path))
        elif path.is_file():
            executable = bool(path.stat().st_mode & 0o100)
            entries[path.relative_to(root).as_posix()] = ("file", path.read_bytes(), executable)
        else:
            entries[path.relative_to(root).as_posix()] = ("folder",)
    return entries


def test_the_export_carries_each_code_tasks_tree_as_its_mirror_has_it(
    code_run, code_version, tmp_path
):
    ctx, _, rows = code_run
    workspaces = {bundle_name(json.loads(r["workspace"])): json.loads(r["workspace"]) for r in rows}
    manifest = json.loads((code_version / "manifest.json").read_text())
    assert manifest["workspaces"] == {"folder": "workspaces", "trees": len(workspaces)} != 0
    for name, workspace in workspaces.items():
        tree = unpack(code_version / "workspaces" / name, tmp_path / name / "tree")
        mirror = ctx.unit_tests.mirrors[workspace["repo_id"]]
        checked_out = checkout(mirror, workspace["base"], tmp_path / name / "checkout")
        assert listing(tree) == listing(checked_out) != {}


def test_no_exported_file_holds_a_path_of_this_machine(code_run, tmp_path):
    """The repository's folder, its mirror and the home are nowhere in the taskset, its
    workspace bundles or any projection: a repository goes by its folder's name."""
    ctx, repo, rows = code_run
    version = export_taskset(
        ctx.lake, "code", tmp_path, kinds=export_kinds(), groupings=groupings()
    ).path
    for fmt in formats():
        project(version, fmt, ctx.lake, graders=package_graders())
    assert machine_paths_in(version, this_machines_paths(repo, ctx.config.home)) == {}
    assert {r["repo"] for r in rows} == {repo.name}


@pytest.fixture(scope="module")
def code_package(code_run, code_version, tmp_path_factory) -> dict[str, str]:
    """The verifiers package of the code run's taskset, checked and installed: the environment
    the verifiers virtualenv's Python finds it in."""
    ctx, _, _ = code_run
    tasks = canonical_rows(code_version)
    projection = project(code_version, "verifiers", ctx.lake, graders=package_graders())
    assert projection.skipped == {}  # nothing left out: code tasks included
    readme = (projection.path / "taskset" / "README.md").read_text()
    for kind, n in Counter(t["kind"] for t in tasks).items():
        assert f"| {kind} | none | {n} |" in readme
    assert "FOUNDRY_RUN_UNTRUSTED_CODE_WITHOUT_SANDBOX=1" in readme
    return installed(projection.path / "taskset", tmp_path_factory.mktemp("code-package"))


@needs_verifiers
def test_the_package_grades_code_completions_in_its_sandbox_as_taskfoundry_does(
    code_run, code_version, code_package, tmp_path
):
    """The same completions (reference, empty, two calibration replies, three red-team
    attacks) to a task of each kind score the same through the package as through
    taskfoundry's verifier."""
    ctx, _, _ = code_run
    env = code_package
    tasks = {t["task_id"]: t for t in canonical_rows(code_version)}
    chosen = {t["kind"]: task_id for task_id, t in sorted(tasks.items(), reverse=True)}
    records = [t for t in ctx.lake.records("tasks") if t.task_id in chosen.values()]
    graded = []
    for task in records:
        replies = ctx.lake.rows(
            "SELECT DISTINCT response FROM attempts WHERE task_id = ? ORDER BY response LIMIT 2",
            [task.task_id],
        )
        completions = {"reference": task.answer, "empty": ""}
        completions |= {f"reply-{i}": r["response"] for i, r in enumerate(replies)}
        graded.append((task, completions | red_team_replies(ctx, task)))
    expected, figures = graded_both_ways(ctx, code_version, graded, env, tmp_path)

    assert set(figures["tasks"]) == set(tasks)
    assert all(figures["validated"].values()) and set(figures["validated"]) == set(expected)
    assert figures["rewards"] == expected
    assert {r["reference"] for r in expected.values()} == {1.0}
    assert {r["empty"] for r in expected.values()} == {0.0}
    attacked = [v for r in expected.values() for k, v in r.items() if k.startswith("attack:")]
    assert attacked and set(attacked) == {0.0}
    trainable = {t for t, task in tasks.items() if not task["hackable"] and task["split"] != "eval"}
    assert set(figures["trained"]) == trainable  # prime-rl trains on the code tasks too


@pytest.mark.full
@needs_verifiers
def test_vf_validate_passes_every_code_task_of_the_package(code_version, code_package, tmp_path):
    """`vf-validate` over every task of the package: the reference patch passes and an empty
    reply fails, in the package's sandbox."""
    env = code_package
    tasks = canonical_rows(code_version)
    for split in sorted({task["split"] for task in tasks}):
        out = tmp_path / f"validate-{split}"
        validate = [VERIFIERS_PYTHON.parent / "vf-validate", taskset_id("code")]
        validate += ["--taskset.split", split, "--runtime.type", "subprocess"]
        verifiers_run([*validate, "--rich", "false", "-o", out], env, tmp_path)
        (summary,) = out.glob("*/summary.json")
        outcomes = json.loads(summary.read_text())["outcomes"]
        shipped = [task for task in tasks if task["split"] == split]
        assert outcomes["valid"] == len(shipped) == sum(outcomes.values())


def graded_both_ways(
    ctx, version: Path, graded: list[tuple[Task, dict[str, str]]], env: dict, tmp_path: Path
) -> tuple[dict[str, dict[str, float]], dict]:
    """Each task's completions (`graded`: task, name -> reply) scored by taskfoundry's verifier
    and by the installed package of `version` (`env`): the verifier's rewards, and the
    package's figures (`verifiers_family_check.py`)."""
    cases = {
        task.task_id: {"completions": {k: [{"reply": v}] for k, v in made.items()}, "calls": []}
        for task, made in graded
    }
    expected = {
        task.task_id: {
            k: asyncio.run(ctx.unit_tests.grade(task, v)).reward for k, v in made.items()
        }
        for task, made in graded
    }
    tasks = canonical_rows(version)
    write_rl_toml(tmp_path / "rl.toml", version, tasks, package_graders())
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    name = json.loads((version / "manifest.json").read_text())["name"]
    args = [taskset_id(name), "cases.json", tmp_path / "rl.toml"]
    return expected, verifiers_figures("verifiers_family_check.py", args, env, tmp_path)


def red_team_replies(ctx, task) -> dict[str, str]:
    """The red team's admission attacks on a task, in its language (the forged outcome
    stream, an object equal to anything, a forged wire, the tests' values hard-coded)."""
    paths = parse_edits(task.answer).paths
    mirror = ctx.unit_tests.mirrors[task.workspace.repo_id]
    files, _ = files_at_start(mirror, task.workspace, paths, ctx.unit_tests.limits)
    [check, *_] = ctx.unit_tests.checks(task)
    attacks = admission_attacks_for(files, check.shown if check else [])
    return {f"attack: {attack.name}": attack.reply(files) for attack in attacks}


def test_with_no_sandbox_code_tasks_are_refused_and_say_why(tmp_path, monkeypatch):
    repo = build_sample_repo(tmp_path / "ledgerline")
    ctx = make_context(tmp_path / "home", **SETTINGS)
    ingest_repo(str(repo), ctx.lake, ctx.config.home, ctx.run_id)
    missing = sandbox.Isolation(missing="bubblewrap cannot make namespaces here (planted)")
    monkeypatch.setattr(sandbox, "isolation", lambda: missing)
    monkeypatch.delenv(sandbox.OPT_OUT, raising=False)
    replay_commits(ctx)
    rebuild_functions(ctx)
    refused = [*statuses(ctx, "repo_tests").values(), *statuses(ctx, "rebuild").values()]
    assert [r["stage"] for r in refused] == ["repo_tests", "rebuild"]
    assert all((r["status"], r["reason"]) == ("failed", "sandbox_unavailable") for r in refused)
    assert all("(planted)" in r["detail"] and sandbox.OPT_OUT in r["detail"] for r in refused)
    assert not ctx.lake.records("tasks")
    assert pending_rebuilds(ctx)  # failed, not rejected: a run with a sandbox tries again
