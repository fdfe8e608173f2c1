"""The red team (`foundry redteam`, docs/reward-integrity.md), quick: one code attack of each
class on a small Python task, each scoring 0 and shown to have run (a row whose attack never
ran fails as surely as one that scored), and every answer, report and tool-call attack refused
before a judge is asked. The whole suite runs in `make bench` and on the lake's tasks with
`foundry redteam`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from data.lake import (
    ExactOrF1Spec,
    Lake,
    LLMEquivalenceSpec,
    RubricSpec,
    Status,
    ToolCall,
    ToolCallsSpec,
    UnitTestsSpec,
    utcnow,
)
from data.repos import ingest_repo
from data.runtime.code_grading import Point, outside_checks
from data.runtime.sandbox import Limits
from data.runtime.trial import steps_in_tree
from families.bug_injection import inject_bugs
from flows.cli import main
from judges.redteam import answer_attacks, targets
from judges.redteam.answer_attacks import AnswerAttack
from judges.redteam.code_attacks import ATTACKS, CodeAttack, hard_coded, whole_files
from judges.redteam.run import CodeTarget, Row, attack_answers, attack_code, one_per_class, table
from judges.redteam.targets import verified_code_tasks
from judges.rewards import trainer_task
from judges.rubric_grade import rubric_grade
from tests.conftest import endpoints_for, make_context, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.prices_repo import F2P, FIXED, P2P, SOURCE, whole_file, write_prices_repository
from tests.test_bug_injection import PACKAGE, make_repository

CLASSES = {
    "outcome channel",
    "exits and signals",
    "skips and collection",
    "objects equal to everything",
    "monkeypatching",
    "import system",
    "reading hidden tests or the reference",
    "edits outside the allowed files",
    "timeouts and resources",
    "network and file system",
    "guesses",
    "replay wire",
    "delegation",
}


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> CodeTarget:
    tree = write_prices_repository(tmp_path_factory.mktemp("prices"))

    def try_steps(steps):
        return steps_in_tree(tree, "", steps, Limits(wall_s=15))

    points = [Point("", F2P, P2P)]
    checks = outside_checks(whole_file(FIXED), points, try_steps)
    files = {"src/prices.py": SOURCE}
    return CodeTarget("prices", "synthetic", files, whole_file(FIXED), points, try_steps, checks)


def test_the_suite_has_forty_attacks_in_every_class():
    assert len(ATTACKS) + 1 >= 40  # with the hard-coded tests' values, made per task
    assert {attack.kind for attack in ATTACKS} == CLASSES
    assert len({attack.name for attack in ATTACKS}) == len(ATTACKS)


def test_one_attack_of_each_class_runs_and_scores_0(target):
    attacks = [*one_per_class(ATTACKS), hard_coded(target.checks[0].shown)]
    rows = attack_code(target, attacks)
    assert {row.kind for row in rows} == CLASSES
    assert all(row.ran for row in rows), [row.attack for row in rows if not row.ran]
    assert [row for row in rows if row.reward > 0] == []
    printed = table(rows)
    assert f"{len(rows)} attacks tried, 0 scored, 0 not shown to have run" in printed


def test_the_honest_fix_is_paid_by_the_same_grading(target):
    honest = CodeAttack("the fix", "control", lambda files: whole_files({"src/prices.py": FIXED}))
    [row] = attack_code(target, [honest])
    assert row.reward == 1.0 and not row.ran  # it carries no mark: it is not an attack


def test_a_row_whose_attack_never_ran_does_not_hold(target):
    # stopped before it runs by the static tripwire: the row proves nothing about the grader
    named = CodeAttack(
        "names os._exit",
        "exits and signals",
        lambda files: whole_files({"src/prices.py": SOURCE + "\nimport os\nos._exit(0)\n"}),
    )
    [row] = attack_code(target, [named])
    assert row.reward == 0.0 and not row.ran and not row.held
    assert "1 attacks tried, 0 scored, 1 not shown to have run" in table([row])


def test_a_row_that_scored_is_printed_with_its_reason():
    row = Row("a", "outcome channel", "bug_fix", "t1", 1.0, "fail-to-pass 1/1", True)
    printed = table([row])
    assert "why: fail-to-pass 1/1" in printed and "1 attacks tried, 1 scored" in printed
    assert not row.held


@pytest.mark.full
def test_the_cli_attacks_the_lakes_verified_code_tasks(tmp_path: Path, capsys):
    repo = make_repository(tmp_path / "stockroom")
    settings = {"code": {"max_bugs": 1}, "calibrate": {"method": "fixed", "k": 1}}
    ctx = make_context(tmp_path / "home", **settings, repair={"max_steps": 0})
    ingest_repo(str(repo), ctx.lake, ctx.config.home, ctx.run_id)
    inject_bugs(ctx)
    with FakeOpenAIServer(Oracle(code=dict(PACKAGE))) as server:
        run_llm_stages(ctx, endpoints_for(server))
    [task] = verified_code_tasks(ctx.lake)
    code = main(["redteam", "--home", str(ctx.config.home), "--quick", "--wall-s", "15"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"bug_fix          {ATTACKS[0].name}" in printed
    assert f"{len(CLASSES)} attacks tried, 0 scored, 0 not shown to have run" in printed


def answer_tasks():
    question = "Where was Mira Olsen born?"
    specs = (
        ExactOrF1Spec(),
        LLMEquivalenceSpec(),
        RubricSpec(rubric=["names the town she was born in"], by_item=True),
    )
    lookup = ToolCall(name="lookup_order", arguments={"order_id": "A-1"})
    calls = trainer_task("Find order A-1.", "", ToolCallsSpec(tool_calls=[lookup]), "tool_replay")
    return [*(trainer_task(question, "Tessaly Port", spec) for spec in specs), calls]


def test_answer_report_and_call_attacks_are_refused_before_any_judge():
    rows = attack_answers(answer_tasks(), answer_attacks.ATTACKS)
    assert {row.kind for row in rows} == {
        "answer stuffing",
        "format tricks",
        "prompt injection",
        "forged calls",
    }
    assert len(rows) >= 25 and all(row.held for row in rows), table(rows)


def test_an_attempt_that_reaches_a_judge_counts_as_paid():
    # with a judge that says yes it would be: only a refusal before the judge is a hold
    paraphrase = AnswerAttack("a paraphrase", "control", lambda t: "A harbour town on the coast.")
    [row] = attack_answers(answer_tasks()[1:2], [paraphrase])
    assert row.reward == 1.0 and row.why.startswith("reached a judge")


def test_the_tasks_attacked_are_those_whose_verifier_type_grades_a_reply(tmp_path, monkeypatch):
    # picked by the type's registry record (its `grade`), not a list of spec classes: a type
    # that grades a reply itself, as a new judge-graded one does, is attacked with no edit here
    lake = Lake(tmp_path / "home")
    answer = trainer_task("Where was Mira Olsen born?", "Tessaly Port", RubricSpec(rubric=["x"]))
    code = trainer_task("Fix it.", "", UnitTestsSpec(fail_to_pass=["t.py::a"]), "bug_fix")
    tasks = [t.model_copy(update={"task_id": f"t{i}"}) for i, t in enumerate((answer, code))]
    lake.write("tasks", tasks)
    verified = [
        Status(
            stage="verify",
            item_id=t.task_id,
            status="done",
            reason="accepted",
            detail="",
            run_id="r",
            recorded_at=utcnow(),
        )
        for t in tasks
    ]
    lake.write("status", verified)
    assert [t.task_id for t in targets.verified_tasks(lake, every_task=True)] == ["t0"]

    registered = targets.verifier_type

    def unit_tests_graded_by_the_panel(spec):
        found = registered(spec)
        judged = replace(found, grade=rubric_grade, judged=True)
        return judged if found.name == code.verifier.type else found

    monkeypatch.setattr(targets, "verifier_type", unit_tests_graded_by_the_panel)
    assert [t.task_id for t in targets.verified_tasks(lake, every_task=True)] == ["t0", "t1"]
