"""No verdict is not 0 (docs/reward-integrity.md, "No verdict"): an attempt the grader could not
judge (the sandbox did not start, the machine too slow to run even the reference in time, a
world that cannot be opened, a judge server that is down) is recorded without a reward and with
its reason, is left out of calibration's n, and gets None from the trainer's reward functions;
a wrong answer, and an endless loop, still get 0. Each failure is injected at its one seam."""

from __future__ import annotations

import asyncio
import json

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data.config import CalibrateConfig
from data.lake import (
    Attempt,
    Lake,
    LLMEquivalenceSpec,
    Task,
    UnitTestsSpec,
    Usage,
    Workspace,
    format_funnel,
    funnel,
)
from data.llm import LLMClient, free_port
from data.repos import git
from data.runtime import world_grading, world_runtime
from data.runtime.code_grading import Point, grade, outside_checks
from data.runtime.errors import NoVerdict
from data.runtime.sandbox import Limits, Sandbox, SandboxUnavailable
from data.runtime.trial import steps_in_tree
from flows.stages import calibrate_into
from harnesses.single_turn import CLOSED_BOOK, SingleTurn
from harnesses.tool_replay import attempt_text
from judges import calibration
from judges.rewards import trainer_task
from judges.unit_tests import UnitTests, unit_test_reward
from judges.verifier_types.trainer_rewards import judge_reward, verifier_reward
from tests.conftest import make_context
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.scripted_llm import ScriptedLLM, fake_endpoints
from tests.prices_repo import F2P, FIXED, P2P, SOURCE, whole_file, write_prices_repository
from tests.test_reward_integrity_answers import FIND, LIST, WORLD_GOLD, _calls, cancel, world_task

WRONG = whole_file(SOURCE.replace("    return 0\n", "    return len(text)\n"))
ENDLESS = whole_file(SOURCE.replace("    return 0\n", "    while True:\n        pass\n"))
SANDBOX_DOWN = "no namespaces can be made here (injected)"
ROOMY = Limits(wall_s=60)
REFERENCE_IN_TIME = "hit the time limit (the reference's kept within it)"


def sandbox_fails_to_start(monkeypatch, times: int | None = None) -> None:
    """The seam: opening a sandbox raises as it does where no isolation can be made, `times`
    times (None: every time)."""
    opened = Sandbox.__enter__
    left = [times]

    def enter(self: Sandbox) -> Sandbox:
        if left[0] is None or left[0] > 0:
            left[0] = None if left[0] is None else left[0] - 1
            raise SandboxUnavailable(SANDBOX_DOWN)
        return opened(self)

    monkeypatch.setattr(Sandbox, "__enter__", enter)


# --- code: the runtime's grade ----------------------------------------------------------------


@pytest.fixture(scope="module")
def prices(tmp_path_factory):
    """The prices repository's tree, its checkpoint and its outside check (made while the
    sandbox works), and a grader of replies under `limits`."""
    tree = write_prices_repository(tmp_path_factory.mktemp("prices"))
    points = [Point("", F2P, P2P)]

    def tried(limits: Limits):
        return lambda steps: steps_in_tree(tree, "", steps, limits)

    checks = outside_checks(whole_file(FIXED), points, tried(ROOMY))

    def graded(reply: str, limits: Limits = ROOMY) -> tuple[float, str]:
        return grade(reply, whole_file(FIXED), points, tried(limits), checks)

    return graded


def test_a_sandbox_that_fails_to_start_gives_no_verdict_not_0(prices, monkeypatch):
    sandbox_fails_to_start(monkeypatch)
    with pytest.raises(NoVerdict) as raised:
        prices(whole_file(FIXED))
    assert (raised.value.reason, raised.value.detail) == ("sandbox_unavailable", SANDBOX_DOWN)


def test_a_sandbox_start_that_fails_otherwise_names_the_failure(prices, monkeypatch):
    def no_space(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Sandbox, "__enter__", no_space)
    with pytest.raises(NoVerdict) as raised:
        prices(WRONG)
    assert raised.value.reason == "grader_failed"
    assert raised.value.detail == "OSError: [Errno 28] No space left on device"


def test_with_the_sandbox_up_the_right_answer_scores_1_and_a_wrong_one_0(prices):
    assert prices(whole_file(FIXED)) == (1.0, "fail-to-pass 1/1, pass-to-pass 1/1")
    reward, why = prices(WRONG)
    assert reward == 0.0 and "outside check" in why


def test_an_attempt_that_loops_for_ever_scores_0_where_the_reference_runs_in_time(prices):
    reward, why = prices(ENDLESS, Limits(wall_s=8))
    assert reward == 0.0 and "(timed out before pytest's end record)" in why
    assert why.endswith(f"the replay of the outside check's calls {REFERENCE_IN_TIME}")


def test_a_machine_too_slow_for_the_reference_gives_no_verdict(prices):
    """The time limit is the seam: where the reference, run the same way just after, is cut
    off too, the right answer's cut-off run says nothing about it."""
    with pytest.raises(NoVerdict) as raised:
        prices(whole_file(FIXED), Limits(wall_s=0.1))
    assert raised.value.reason == "grader_timeout"
    assert "and so did the reference's" in raised.value.detail


# --- code: calibration and the trainer's reward -------------------------------------------------


@pytest.fixture(scope="module")
def code_task(tmp_path_factory) -> tuple[Task, UnitTests]:
    """A bug-fix task on the prices repository (a git mirror of it), and its verifier with the
    outside check already made."""
    repo = write_prices_repository(tmp_path_factory.mktemp("mirror"))
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=A", "-c", "user.email=a@b.example", "commit", "-qm", "start")
    base = git(repo, "rev-parse", "HEAD").strip()
    workspace = Workspace(repo_id="prices", origin=str(repo), base=base)
    spec = UnitTestsSpec(fail_to_pass=F2P, pass_to_pass=P2P)
    prompt = "Make `cents` turn a price such as 3.50 into cents."
    task = trainer_task(prompt, whole_file(FIXED), spec, "bug_fix", workspace.model_dump())
    task = task.model_copy(update={"task_id": "prices-cents"})
    unit_tests = UnitTests({"prices": repo}, ROOMY)
    unit_tests.checks(task)
    return task, unit_tests


def calibrated(tmp_path, task, unit_tests, reply):
    """`task` through the calibrate stage (fixed, k=2) with a solver that always gives `reply`:
    its status and records, written to the lake as the stage runner writes them."""
    ctx = make_context(tmp_path / "home", calibrate={"method": "fixed", "k": 2})
    ctx._unit_tests = unit_tests
    solver = ScriptedLLM(lambda role, messages, params: reply, roles=("solver",))
    outcome = asyncio.run(calibrate_into("calibrate")(ctx, task.task_id, task, solver))
    for table, records in outcome.records.items():
        ctx.lake.write(table, records, ctx.run_id)
    ctx.lake.write("status", [outcome.status], ctx.run_id)
    return ctx, outcome.status


def test_calibration_leaves_an_attempt_without_a_verdict_out_of_n(code_task, monkeypatch, tmp_path):
    task, unit_tests = code_task
    sandbox_fails_to_start(monkeypatch, times=1)
    ctx, status = calibrated(tmp_path, task, unit_tests, whole_file(FIXED))

    attempts = sorted(ctx.lake.records("attempts"), key=lambda a: a.index)
    [missing] = [a for a in attempts if a.reward is None]
    assert (missing.no_verdict, missing.reason) == ("sandbox_unavailable", SANDBOX_DOWN)
    assert [a.reward for a in attempts if a is not missing] == [1.0, 1.0]
    assert len(attempts) == 3  # the one without a verdict was replaced, not counted
    [difficulty] = ctx.lake.records("difficulty")
    assert (difficulty.n, difficulty.passes, difficulty.band) == (2, 2, "too_easy")
    assert (status.status, status.detail) == (
        "done",
        "2 of 2 passed in code_single_turn; 1 more without a verdict",
    )
    summary = funnel(ctx.lake)
    assert summary["no_verdict"] == [
        {"stage": "calibrate", "reason": "sandbox_unavailable", "n": 1}
    ]
    assert (
        "attempts without a verdict (left out of pass rates): calibrate sandbox_unavailable 1"
        in (format_funnel(summary))
    )


def test_a_lake_written_before_no_verdict_existed_reads_every_attempt_as_judged(tmp_path):
    lake = Lake(tmp_path / "home")
    attempt = Attempt(
        attempt_id="a1",
        task_id="t1",
        index=0,
        harness="closed_book",
        solver_model="m",
        temperature=0.8,
        seed=1,
        response="Paris",
        reward=0.0,
        usage=Usage(),
    )
    row = pa.Table.from_pylist([attempt.to_row()], schema=Attempt.arrow_schema())
    (lake.root / "attempts").mkdir(parents=True)
    pq.write_table(
        row.drop(["no_verdict"]),
        lake.root / "attempts" / "20200101T000000000000-old-00000000.parquet",
    )
    assert lake.records("attempts") == [attempt]
    assert funnel(lake)["no_verdict"] == []


def test_a_wrong_answer_is_still_calibrated_as_a_failure(code_task, tmp_path):
    task, unit_tests = code_task
    ctx, status = calibrated(tmp_path, task, unit_tests, WRONG)
    assert [a.reward for a in ctx.lake.records("attempts")] == [0.0, 0.0]
    [difficulty] = ctx.lake.records("difficulty")
    assert (difficulty.n, difficulty.passes, difficulty.band) == (2, 0, "too_hard")
    assert funnel(ctx.lake)["no_verdict"] == []


def test_calibration_without_any_verdict_fails_and_keeps_its_attempts(
    code_task, monkeypatch, tmp_path
):
    task, unit_tests = code_task
    sandbox_fails_to_start(monkeypatch)
    ctx, status = calibrated(tmp_path, task, unit_tests, whole_file(FIXED))
    assert (status.status, status.reason) == ("failed", "no_verdict")
    assert status.detail == f"2 of 2 attempts: sandbox_unavailable: {SANDBOX_DOWN}"
    assert [a.no_verdict for a in ctx.lake.records("attempts")] == ["sandbox_unavailable"] * 2
    assert ctx.lake.records("difficulty") == []  # no pass rate rests on no verdict


def code_rewards(task: Task, unit_tests: UnitTests, replies: list[str]) -> list[float | None]:
    """`unit_test_reward` on `replies` to `task`, the columns as a `trl` row holds them."""
    rows = len(replies)
    return unit_test_reward(unit_tests)(
        [[m.model_dump() for m in task.prompt]] * rows,
        [[{"role": "assistant", "content": reply}] for reply in replies],
        verifier=[task.verifier.model_dump_json()] * rows,
        workspace=[task.workspace.model_dump_json()] * rows,
        kind=[task.kind] * rows,
        solution=[task.answer] * rows,
    )


def test_the_code_reward_gives_none_where_the_sandbox_fails_to_start(code_task, monkeypatch):
    task, unit_tests = code_task
    assert code_rewards(task, unit_tests, [whole_file(FIXED), WRONG]) == [1.0, 0.0]
    sandbox_fails_to_start(monkeypatch)
    assert code_rewards(task, unit_tests, [whole_file(FIXED), WRONG]) == [None, None]


# --- judged verifiers: a judge server that is down ----------------------------------------------

QUESTION, GOLD, PARAPHRASE = "Where was she born?", "Tessaly Port", "the harbour town"


def not_equivalent(body):
    return json.dumps({"equivalent": False, "reason": "another place"})


def test_an_attempt_whose_judge_was_down_is_left_out_of_n():
    """The judge's server answers its first request with a 503 (no retries): that attempt has
    no verdict and another takes its place; the judge's 'no' on the others is a 0."""
    task = trainer_task(QUESTION, GOLD, LLMEquivalenceSpec())
    config = CalibrateConfig(method="fixed", k=2)
    how = calibration.plan(config, [])
    with (
        FakeOpenAIServer(lambda body: PARAPHRASE) as solver,
        FakeOpenAIServer(not_equivalent, faults=["503"]) as judge,
    ):
        endpoints = {
            "solver": fake_endpoints(solver.base_url)["solver"],
            "judge:0": fake_endpoints(judge.base_url)["judge:0"],
        }

        async def run():
            llm = LLMClient(endpoints, cache=None)
            try:
                return await calibration.calibrate(task, llm, config, how, SingleTurn(CLOSED_BOOK))
            finally:
                await llm.aclose()

        attempts, difficulty = asyncio.run(run())
    [missing] = [a for a in attempts if a.reward is None]
    assert missing.no_verdict == "judge_undecided" and "http_503" in missing.reason
    assert [a.reward for a in attempts if a is not missing] == [0.0, 0.0]
    assert (len(attempts), difficulty.n, difficulty.passes) == (3, 2, 0)


def test_the_judge_reward_gives_none_while_the_judge_is_down_and_0_once_it_says_no():
    prompts = [[{"role": "user", "content": QUESTION}]]
    columns = {"verifier": [LLMEquivalenceSpec().model_dump_json()], "solution": [GOLD]}
    down = fake_endpoints(f"http://127.0.0.1:{free_port()}/v1")
    assert judge_reward(down)(prompts, [PARAPHRASE], **columns) == [None]
    with FakeOpenAIServer(not_equivalent) as judge:
        assert judge_reward(fake_endpoints(judge.base_url))(prompts, [PARAPHRASE], **columns) == [
            0.0
        ]


# --- world verifiers: a world that cannot be opened, a call cut off -----------------------------


@pytest.fixture(scope="module")
def shop() -> Task:
    """A world task on the outdoor shop (its gold final state made before any seam is cut)."""
    return world_task()


def world_rewards(task: Task, calls: list[tuple]) -> list[float | None]:
    """`verifier_reward` on the attempt making `calls`, the columns as a `trl` row holds them."""
    return verifier_reward(
        [[m.model_dump() for m in task.prompt]],
        [attempt_text(_calls(*calls))],
        verifier=[task.verifier.model_dump_json()],
        solution=[task.answer],
        world=[task.world.model_dump_json()],
    )


def graded_calls(task: Task, calls: list[tuple]) -> tuple[float, str]:
    """`grade_calls` on the attempt making `calls` at `task`."""
    gold = [(c.name, c.arguments) for c in task.verifier.tool_calls]
    spec = world_runtime.WorldSpec.model_validate_json(task.world.spec)
    final = task.verifier.final_state
    return world_grading.grade_calls(spec, task.world.initial, calls, "", gold, final, task.answer)


def test_a_world_that_cannot_be_opened_gives_no_verdict(shop, monkeypatch):
    assert world_rewards(shop, WORLD_GOLD) == [1.0]
    assert world_rewards(shop, [FIND, LIST, cancel(88213)]) == [0.0]

    def cannot_open(spec, initial):
        raise duckdb.IOException("could not allocate the database (injected)")

    monkeypatch.setattr(world_runtime, "_world_at", cannot_open)
    assert world_rewards(shop, WORLD_GOLD) == [None]
    with pytest.raises(NoVerdict, match="world_failed: IOException"):
        graded_calls(shop, WORLD_GOLD)


def calls_cut_off(monkeypatch, cut) -> None:
    """The seam: a tool call the world runs is stopped at its time limit where `cut` says."""
    called = world_runtime.World.call

    def call(self, name, arguments):
        if cut(name, arguments):
            return world_runtime.ToolResult(False, error="the call ran too long", timed_out=True)
        return called(self, name, arguments)

    monkeypatch.setattr(world_runtime.World, "call", call)


def test_a_world_call_of_the_attempt_s_own_cut_off_scores_0(shop, monkeypatch):
    calls_cut_off(monkeypatch, lambda name, arguments: arguments.get("order_id") == 88213)
    reward, why = graded_calls(shop, [FIND, LIST, cancel(88213)])
    assert reward == 0.0
    assert why.endswith("1 of its calls hit the 10 s limit (the gold calls kept within it)")


def test_a_world_too_slow_for_the_gold_calls_gives_no_verdict(shop, monkeypatch):
    calls_cut_off(monkeypatch, lambda name, arguments: name == "cancel_order")
    with pytest.raises(NoVerdict, match="grader_timeout: 1 of its calls and 1 of the gold"):
        graded_calls(shop, WORLD_GOLD)
    assert world_rewards(shop, WORLD_GOLD) == [None]
