"""Every family's attempts score the same in calibration and in the environment its export gives
a trainer: the calibration attempts stored in the lake, re-scored from the exported taskset's
TRL rows by the reward functions a trainer uses, get the reward calibration gave them."""

from __future__ import annotations

import pytest

from data.export import canonical_rows, export_taskset, trl_row
from data.repos import build_sample_repo, git, ingest_repo
from data.traces import ingest_traces
from families import REGISTERED, export_kinds
from families.bug_injection import inject_bugs
from families.code_stages import replay_commits
from families.function_rebuild import rebuild_functions
from judges.unit_tests import unit_test_reward
from judges.verifier_types.trainer_rewards import judge_reward, verifier_reward
from sources import groupings
from sources.documents import ingest_docs
from sources.worlds import ingest_world_files
from tests.conftest import endpoints_for, make_context, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.test_pipeline import small_corpus
from tests.test_traces import SAMPLE_TRACES
from tests.test_world_tasks import WORLDS

SHIPPED = list(REGISTERED)  # the families this package registers (not a test's own)
ATTEMPTS_PER_TASK = 3  # re-scored per exported task (code attempts each run the tests again)
SETTINGS = {
    "generate": {"max_chunks": 3},
    # three bugs: at most two of ledgerline's functions with a plain mutation site are in
    # parse.py, whose whole-file replies pass the 2,000 characters a stored response keeps, so
    # at least one bug-fix attempt can be scored again whatever order the repository id draws
    "code": {"max_functions": 1, "max_bugs": 3, "max_replays": 2},
    "traces": {"max_traces": 8},
    "worlds": {"tasks_per_world": 1},
    "reports": {"max_reports": 2},
    "calibrate": {"method": "fixed", "k": 4},
    "repair": {"max_steps": 0},
    "sandbox": {"wall_s": 120},
}


@pytest.fixture(scope="module")
def scored_run(tmp_path_factory):
    """Every family's tasks made from the samples with the oracle as every model, calibrated
    and exported; the oracle server stays up as the trainer's judge."""
    root = tmp_path_factory.mktemp("families")
    repo = build_sample_repo(root / "ledgerline")
    head = {p: (repo / p).read_text() for p in git(repo, "ls-files", "src").splitlines()}
    ctx = make_context(root / "home", **SETTINGS)
    ingest_docs([str(small_corpus(root))], ctx)
    ingest_repo(str(repo), ctx.lake, ctx.config.home, ctx.run_id)
    replay_commits(ctx)
    rebuild_functions(ctx)
    inject_bugs(ctx)
    ingest_traces([str(SAMPLE_TRACES)], ctx.lake, ctx.config.traces, ctx.run_id, lambda _: None)
    ingest_world_files([str(WORLDS)], ctx)
    with FakeOpenAIServer(Oracle(code=head)) as server:
        endpoints = endpoints_for(server)
        run_llm_stages(ctx, endpoints)
        version = export_taskset(
            ctx.lake, "all", root / "tasksets", kinds=export_kinds(), groupings=groupings()
        )
        yield ctx, canonical_rows(version.path), endpoints


def exported_reward(row: dict, completion: str, ctx, endpoints) -> float | None:
    """The reward a trainer gets for `completion` from the task's TRL row: the first of the
    reward functions that scores its verifier type (the others return None for it)."""
    columns = {
        "prompts": [row["prompt"]],
        "completions": [completion],
        "verifier": [row["verifier"]],
        "solution": [row["solution"]],
        "workspace": [row["workspace"]],
        "kind": [row["kind"]],
        "world": [row["world"]],
    }
    for reward in (
        verifier_reward,
        judge_reward(endpoints, ctx.cache),
        unit_test_reward(ctx.unit_tests),
    ):
        value = reward(**columns)[0]
        if value is not None:
            return value
    return None


@pytest.mark.parametrize("family", SHIPPED, ids=lambda family: type(family).__name__)
def test_calibration_and_the_exported_environment_score_an_attempt_alike(scored_run, family):
    ctx, rows, endpoints = scored_run
    exported = [row for row in rows if row["kind"] in family.kinds]
    assert exported, f"the sample run exported no {family.kinds} task"
    ids = [row["task_id"] for row in exported]
    attempts = ctx.lake.records("attempts", "list_contains(?, task_id)", [ids])
    compared = 0
    for row in exported:
        task = _task(ctx, row["task_id"])
        assert row["harness"] == family.environment(task, ctx.config, endpoints["solver"])
        own = sorted(
            (a for a in attempts if a.task_id == row["task_id"] and a.harness == row["harness"]),
            key=lambda a: a.index,
        )
        # a stored response is cut at 2,000 characters: only whole ones can be scored again
        for attempt in [a for a in own if len(a.response) < 2000][:ATTEMPTS_PER_TASK]:
            again = exported_reward(trl_row(row), attempt.response, ctx, endpoints)
            assert again == attempt.reward, (row["kind"], attempt.response[:200], attempt.reason)
            compared += 1
    assert compared, f"no {family.kinds} attempt could be scored again"


def _task(ctx, task_id: str):
    [task] = ctx.lake.records("tasks", "task_id = ?", [task_id])
    return task
