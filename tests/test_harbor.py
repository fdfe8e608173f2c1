"""`foundry export --format harbor`: the code tasks of a fake run over the sample repository
(commit replay, commit sequence, function rebuild, bug fix) and answer tasks as Harbor task
directories.

Harbor's own linter passes on every one and Harbor takes each for a task; eval tasks live only
under `harbor/eval/`; the agent's container holds the tree taskfoundry starts the task from and
nothing of the grader's (the gold, the reference, the hidden tests); and the verifier's
`tests/test.sh`, run here on this machine (the sandbox standing in for the verifier's own
container), gives the solution 1, doing nothing 0, and the calibration's attempts the rewards
taskfoundry's grader gave them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from data.export import (
    TreeError,
    canonical_rows,
    export_taskset,
    project,
    reference_trees,
    short_name,
    why_left_out,
    write_harbor,
)
from data.lake import ExactOrF1Spec, LLMEquivalenceSpec
from data.repos import checkout
from data.runtime.code_grading import edits_of
from data.runtime.edits import apply_patch
from data.runtime.sandbox import Limits, Sandbox
from data.runtime.tree_diff import text_files
from data.runtime.workspace_bundle import unpack
from families import export_kinds
from families.bug_injection import inject_bugs
from families.function_rebuild import rebuild_functions
from judges.verifier_types import package_graders
from sources import groupings
from tests.exported_files import file_text
from tests.test_code_tasks import red_team_replies, sample_code_run

ROOT = Path(__file__).resolve().parent.parent
HARBOR_VENV = Path(os.environ.get("FOUNDRY_HARBOR_VENV", ROOT / ".venv-harbor"))
needs_harbor = pytest.mark.skipif(
    not (HARBOR_VENV / "bin" / "harbor").exists(),
    reason=f"Harbor's virtualenv ({HARBOR_VENV}) is missing: run `make test`",
)
SETTINGS = {
    "code": {"max_functions": 1, "max_bugs": 1},
    "calibrate": {"method": "fixed", "k": 2},
    "repair": {"max_steps": 0},
}
CODE_KINDS = {"bug_fix", "commit_replay", "commit_sequence", "function_rebuild"}
_runs = count()


@pytest.fixture(scope="module")
def code_export(tmp_path_factory):
    """A fake run over the sample repository, the oracle as every model, exported and projected
    to Harbor: (context, version folder, projection)."""
    root = tmp_path_factory.mktemp("harbor-code")
    ctx, _ = sample_code_run(root, SETTINGS, rebuild_functions, inject_bugs)
    kinds, found = export_kinds(), groupings()
    version = export_taskset(ctx.lake, "code", root / "tasksets", kinds=kinds, groupings=found).path
    return ctx, version, project(version, "harbor", ctx.lake, graders=package_graders())


def answer_row(task_id: str, prompt: list[dict[str, str]], answer: str, **columns: Any) -> dict:
    """A canonical taskset row of an answer task, with the columns the projection reads."""
    return {
        "task_id": task_id,
        "kind": "doc_qa",
        "prompt": prompt,
        "answer": answer,
        "verifier": ExactOrF1Spec().model_dump_json(),
        "harness": "open_book",
        "split": "train",
        "band": "in_band",
        "pass_rate": 0.5,
        "pool": "normal",
        "hackable": False,
        "world": None,
        "environment": None,
        "workspace": None,
        **columns,
    }


EXACT_ONLY = LLMEquivalenceSpec(rubric=["names the year the mill closed"])
HARBOR_ANSWERS = {"open-1", "cloze-1", "judged-1"}


def answer_rows() -> list[dict]:
    """Three answer tasks Harbor can hold (an open-book question, a closed-book fill-in-the-blank
    of the eval split, a judged equivalence whose rubric takes exact matches only, as the
    package grades it) and three it cannot (document search, a rubric, a world)."""
    question = "When did the Harlow mill close?"
    passage = (
        "Answer with only the short answer.\n\nThe Harlow mill closed in 1887 after the flood."
    )
    cloze = ExactOrF1Spec(context=["The Orvanne bridge carries", "vehicles a day."])
    asked = [{"role": "system", "content": passage}, {"role": "user", "content": question}]
    blank = "Fill in the blank: The Orvanne bridge carries ____ vehicles a day."
    return [
        answer_row("open-1", asked, "1887"),
        answer_row(
            "cloze-1",
            [{"role": "user", "content": blank}],
            "21,000",
            verifier=cloze.model_dump_json(),
            harness="closed_book",
            split="eval",
        ),
        answer_row("search-1", asked[1:], "1887", harness="doc_search"),
        answer_row("rubric-1", asked, "a report", verifier=json.dumps({"type": "rubric"})),
        answer_row("judged-1", asked, "the year 1887", verifier=EXACT_ONLY.model_dump_json()),
        answer_row(
            "world-1",
            asked,
            "",
            verifier=json.dumps({"type": "world_state"}),
            world=json.dumps({"world_id": "w", "max_turns": 4}),
            harness="world_tools",
        ),
    ]


@pytest.fixture(scope="module")
def answer_export(tmp_path_factory) -> tuple[Path, list[dict], tuple[int, dict[str, int]]]:
    """The answer rows projected to Harbor: (the Harbor folder, the rows, what was written)."""
    version = tmp_path_factory.mktemp("harbor-answers") / "v0002"
    version.mkdir()
    (version / "manifest.json").write_text(json.dumps({"name": "answers", "version": "v0002"}))
    rows = answer_rows()
    written = write_harbor(version / "harbor", version, rows, package_graders())
    return version / "harbor", rows, written


def task_dirs(harbor: Path) -> list[Path]:
    return sorted(p for side in ("train", "eval") for p in (harbor / side).glob("*") if p.is_dir())


def code_dirs(version: Path) -> dict[str, Path]:
    """Each code task's directory by task id."""
    tasks = canonical_rows(version)
    return {t["task_id"]: version / "harbor" / t["split"] / short_name(t) for t in tasks}


def one_of_each_kind(version: Path) -> dict[str, dict]:
    """The first code task of each kind."""
    chosen: dict[str, dict] = {}
    for task in sorted(canonical_rows(version), key=lambda t: t["task_id"]):
        chosen.setdefault(task["kind"], task)
    return chosen


# --- running a task as Harbor would: the solution, then the verifier's test.sh ---------------


def fresh_app(task_dir: Path, tmp: Path) -> Path:
    """`/app` as the agent's container starts: the workspace of a code task, else empty."""
    app = tmp / f"app-{next(_runs)}"
    workspace = task_dir / "environment" / "workspace.tar.gz"
    if workspace.exists():
        return unpack(workspace, app)
    app.mkdir()
    return app


def solve(solution: Path, app: Path) -> None:
    """Run the task's (or step's) `solution/solve.sh` on `app`."""
    env = {**os.environ, "FOUNDRY_APP": str(app)}
    subprocess.run(["bash", solution / "solve.sh"], env=env, check=True, timeout=60)


def graded(task_dir: Path, app: Path, tmp: Path, checkpoint: int = 1) -> dict[str, Any]:
    """The verifier's `tests/test.sh` run on `app` with this project's Python: the reward it
    wrote where Harbor reads it, and why."""
    logs = tmp / f"logs-{next(_runs)}"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "FOUNDRY_APP": str(app),
        "FOUNDRY_VERIFIER_LOGS": str(logs),
        "FOUNDRY_CHECKPOINT": str(checkpoint),
    }
    done = subprocess.run(
        ["bash", task_dir / "tests" / "test.sh"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    reward = json.loads((logs / "reward.json").read_text())["reward"]
    return {**json.loads((logs / "grade.json").read_text()), "reward": reward}


# --- the tests ------------------------------------------------------------------------------


def test_every_code_and_answer_task_is_a_task_directory_the_rest_counted_by_reason(
    code_export, answer_export
):
    _, version, projection = code_export
    tasks = canonical_rows(version)
    assert {t["kind"] for t in tasks} == CODE_KINDS
    assert projection.rows == len(tasks) and projection.skipped == {}
    assert {p.name for p in task_dirs(projection.path)} == {short_name(t) for t in tasks}
    for task_dir in code_dirs(version).values():
        assert (task_dir / "task.toml").is_file()

    harbor, rows, (written, skipped) = answer_export
    assert written == 3 and {p.name for p in task_dirs(harbor)} == {
        short_name(r) for r in rows if r["task_id"] in HARBOR_ANSWERS
    }
    assert skipped == {"tools_search": 1, "verifier_rubric": 1, "verifier_world_state": 1}
    readme = (harbor / "README.md").read_text()
    graders = package_graders()
    assert all(
        f"| {reason} | 1 | {why_left_out(reason, graders)} |" in readme for reason in skipped
    )
    assert "needs a judge model" in readme and "`world` grader" in readme


@needs_harbor
def test_harbors_linter_passes_and_harbor_reads_every_task(code_export, answer_export):
    """`harbor lint` (its default rules and `root-agent`) finds nothing in any task directory,
    and Harbor takes each for a task, named `org/name`, its split in its metadata."""
    folders = [code_export[2].path, answer_export[0]]
    dirs = [d for folder in folders for d in task_dirs(folder)]
    lint = [HARBOR_VENV / "bin" / "harbor", "lint", "--extend-select", "root-agent", "--json"]
    done = subprocess.run([*lint, *dirs], capture_output=True, text=True, timeout=300)
    assert (done.returncode, json.loads(done.stdout or "null")) == (0, []), done.stdout[-3000:]

    sides = [folder / side for folder in folders for side in ("train", "eval")]
    check = [HARBOR_VENV / "bin" / "python", ROOT / "tests" / "harbor_check.py", *sides]
    done = subprocess.run(check, capture_output=True, text=True, timeout=300, check=True)
    figures = json.loads(done.stdout)
    read = {name: task for side in figures.values() for name, task in side.items()}
    assert set(read) == {d.name for d in dirs}
    for side, tasks in figures.items():
        for name, task in tasks.items():
            assert task["valid"] and task["split"] == Path(side).name, (side, name)
            organisation, _, task_name = task["name"].partition("/")
            assert organisation.startswith("taskfoundry-") and task_name == name
    sequences = [t for t in read.values() if t["name"].split("/")[1].startswith("commit-sequence")]
    assert sequences and all(t["steps"] >= 2 for t in sequences)


def test_eval_tasks_are_only_under_the_eval_tree(code_export, answer_export):
    _, version, projection = code_export
    _, rows, _ = answer_export
    exported = [(projection.path, t) for t in canonical_rows(version)]
    exported += [(answer_export[0], r) for r in rows if r["task_id"] in HARBOR_ANSWERS]
    assert {task["split"] for _, task in exported} == {"train", "eval"}
    for harbor, task in exported:
        other = "train" if task["split"] == "eval" else "eval"
        assert (harbor / task["split"] / short_name(task)).is_dir()
        assert not (harbor / other / short_name(task)).exists()
        metadata = (harbor / task["split"] / short_name(task) / "task.toml").read_text()
        assert f'split = "{task["split"]}"' in metadata
    for harbor, task in exported:
        if task["split"] == "eval":
            train = [p for p in (harbor / "train").rglob("*") if p.is_file()]
            assert not any(task["task_id"] in p.as_posix() for p in train)


def test_the_agents_container_holds_the_start_tree_and_nothing_of_the_graders(
    code_export, answer_export, tmp_path
):
    """A code task's `environment/` is its Dockerfile and the tree taskfoundry starts the task
    from (the base revision and the start patch, applied in the sandbox); no line the reference
    or the hidden tests add to that tree is in it or in the instruction, while the verifier's
    `tests/` holds them. An answer task's gold is in `tests/` and `solution/`, never in
    `environment/`."""
    ctx, version, _ = code_export
    dirs = code_dirs(version)
    for task in canonical_rows(version):
        task_dir, workspace = dirs[task["task_id"]], json.loads(task["workspace"])
        environment = task_dir / "environment"
        assert sorted(p.name for p in environment.iterdir()) == ["Dockerfile", "workspace.tar.gz"]
        mirror = ctx.unit_tests.mirrors[workspace["repo_id"]]
        tree = checkout(mirror, workspace["base"], tmp_path / task["task_id"] / "tree")
        with Sandbox(tree, Limits()) as sandbox:
            assert apply_patch(sandbox, "start.patch", workspace["start_patch"]) is None
            start = text_files(sandbox.tree)[0]
        assert (
            text_files(
                unpack(environment / "workspace.tar.gz", tmp_path / task["task_id"] / "env")
            )[0]
            == start
        )

        secret = hidden_lines(task, start)
        assert secret, task["task_id"]
        seen = [file_text(p) for p in environment.rglob("*") if p.is_file()]
        seen += [p.read_text() for p in task_dir.rglob("instruction.md")]
        assert not [line for line in secret if any(line in text for text in seen)]
        checkpoints = json.loads((task_dir / "tests" / "task.json").read_text())["checkpoints"]
        graders = "".join(c["reference"] + c["test_patch"] for c in checkpoints)
        assert all(line in graders for line in secret)

    harbor, rows, _ = answer_export
    for row in rows[:2]:
        task_dir = harbor / row["split"] / short_name(row)
        assert not any(
            row["answer"] in file_text(p)
            for p in (task_dir / "environment").rglob("*")
            if p.is_file()
        )
        assert row["answer"] in json.loads((task_dir / "tests" / "task.json").read_text())["answer"]
        assert (task_dir / "solution" / "answer.txt").read_text().strip() == row["answer"]


def hidden_lines(task: dict, start: dict[str, str]) -> set[str]:
    """The lines the reference and the hidden tests add that nowhere in the start tree holds."""
    verifier, workspace = json.loads(task["verifier"]), json.loads(task["workspace"])
    patches = [task["answer"], workspace["test_patch"]]
    patches += [point["test_patch"] for point in verifier.get("checkpoints") or []]
    held = "\n".join(start.values())
    added = {
        line[1:].strip()
        for patch in patches
        for line in patch.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    }
    return {line for line in added if len(line) >= 12 and line not in held}


def test_the_solution_scores_1_and_doing_nothing_0_under_the_verifier(
    code_export, answer_export, tmp_path
):
    """The verifier's test.sh on the solution's tree (each step's, for a sequence) and on the
    untouched start, for a code task of each kind and every answer task."""
    _, version, _ = code_export
    dirs = code_dirs(version)
    for kind, task in one_of_each_kind(version).items():
        task_dir = dirs[task["task_id"]]
        steps = sorted((task_dir / "steps").glob("step-*")) or [task_dir]
        solved, untouched = fresh_app(task_dir, tmp_path), fresh_app(task_dir, tmp_path)
        for number, step in enumerate(steps, start=1):
            solve(step / "solution", solved)
            assert graded(task_dir, solved, tmp_path, number)["reward"] == 1.0, (kind, number)
            assert graded(task_dir, untouched, tmp_path, number)["reward"] == 0.0, (kind, number)

    harbor, rows, _ = answer_export
    for row in rows:
        if row["task_id"] not in HARBOR_ANSWERS:
            continue
        task_dir = harbor / row["split"] / short_name(row)
        solved, untouched = fresh_app(task_dir, tmp_path), fresh_app(task_dir, tmp_path)
        solve(task_dir / "solution", solved)
        assert graded(task_dir, solved, tmp_path)["reward"] == 1.0
        assert graded(task_dir, untouched, tmp_path)["reward"] == 0.0
    # a token-F1 match ("1887" against "the year 1887") passes without a rubric, not with one
    judged = harbor / "train" / short_name(next(r for r in rows if r["task_id"] == "judged-1"))
    near = fresh_app(judged, tmp_path)
    (near / "answer.txt").write_text("1887")
    assert graded(judged, near, tmp_path)["reward"] == 0.0


def test_the_verifier_grades_attempts_as_taskfoundrys_grader_does(code_export, tmp_path):
    """Replies with edits, laid over the start tree as an agent would leave them, score in the
    verifier what taskfoundry's grader gives the reply: calibration's attempts at the
    single-step tasks (their recorded rewards), and the red team's attacks on a function
    rebuild (a forged outcome stream, an object equal to anything, the tests' values hard-coded,
    which only the outside check refuses)."""
    ctx, version, _ = code_export
    dirs = code_dirs(version)
    tasks = {t.task_id: t for t in ctx.lake.records("tasks")}
    cases = []  # (task id, reply, taskfoundry's reward)
    for task in sorted(canonical_rows(version), key=lambda t: t["task_id"]):
        if task["kind"] == "commit_sequence":
            continue
        attempts = ctx.lake.rows(
            "SELECT DISTINCT response, reward FROM attempts WHERE task_id = ? ORDER BY response",
            [task["task_id"]],
        )
        cases += [(task["task_id"], a["response"], a["reward"]) for a in attempts]
    cases = [case for case in cases if edits_of(case[1], 1)[0][0] is not None]
    cases = [*[c for c in cases if c[2] == 0.0][:2], *[c for c in cases if c[2] == 1.0][:2]]
    rebuild = next(
        t for t in sorted(tasks.values(), key=lambda t: t.task_id) if t.kind == "function_rebuild"
    )
    for reply in red_team_replies(ctx, rebuild).values():
        cases.append(
            (rebuild.task_id, reply, asyncio.run(ctx.unit_tests.grade(rebuild, reply)).reward)
        )

    compared = []
    for number, (task_id, reply, expected) in enumerate(cases):
        start = fresh_app(dirs[task_id], tmp_path)
        scratch = tmp_path / f"scratch-{number}"
        scratch.mkdir()
        try:
            [tree] = reference_trees(start, reply, 1, scratch)
        except TreeError:  # edits to test files alone, which the grader sets aside
            tree = start
        compared.append((task_id, graded(dirs[task_id], tree, tmp_path)["reward"], expected))
    assert all(harbor == expected for _, harbor, expected in compared), compared
    assert {expected for _, _, expected in compared} == {0.0, 1.0}
    assert len(compared) >= 6
