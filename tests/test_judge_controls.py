"""Judges measured on control items from the run's own chunks before their verdicts count: a
judge that cannot answer what the passage shows, accepts a wrong answer or refuses a right one is
reported with its figure and the remedy, and decides no check in any family: it is left out
where another judge passed, and where none did every check a judge would decide is held; stats,
the report, the manifest and the card show every judge's figure."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re

import pytest

from data.config import CalibrateConfig, VerifyConfig
from data.documents import answer_candidates
from data.export import export_taskset, taskset_version
from data.lake import ExactOrF1Spec, Lake, LLMEquivalenceSpec, funnel
from data.traces import ingest_traces
from families import export_kinds
from flows.cli import main
from flows.stages import pending_verify
from harnesses.single_turn import CLOSED_BOOK, SingleTurn
from judges import calibration, instruction
from judges.controls import (
    BLANK,
    MIN_LONG_WORDS,
    controls_from,
    deciding_judges,
    measure,
    panel_below_bar,
)
from judges.panel import HELD, Held
from judges.rewards import trainer_task
from judges.trace_outcome import rate
from judges.verifier_types import grade
from sources import groupings
from sources.documents import ingest_docs
from sources.worlds import ingest_world_files
from tests.conftest import SAMPLE_DOCS, endpoints_for, make_context, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM, below_the_bar, fake_endpoints
from tests.test_reward_integrity_answers import GOLD, QUESTION, RUBRICS, _trace, world_task, yes_man
from tests.test_traces import SAMPLE_TRACES
from tests.test_world_tasks import WORLDS

WEAK = "weak-judge"
PASSAGES = [doc.read_text() for doc in sorted(SAMPLE_DOCS.glob("*.md"))]


def _proposed(prompt: str) -> str:
    """The answer a control check proposes ("" for an open-book question)."""
    found = re.search(r"^Proposed answer: (.*)$", prompt, flags=re.M)
    return found.group(1) if found else ""


def _coin(prompt: str) -> int:
    """A fair coin flip fixed by the prompt: the same judge answers a prompt the same way."""
    return hashlib.sha256(prompt.encode()).digest()[0] % 2


def oracle_but(check):
    """A judge that answers open-book questions as the oracle does and says what `check`
    (proposed answer, prompt) says to a proposed answer."""
    oracle = Oracle()

    def respond(role, messages, params):
        prompt = messages[-1]["content"]
        proposed = _proposed(prompt)
        if proposed:
            return check(proposed, prompt)
        return oracle.respond(role, messages, params)

    return respond


def guessing(role, messages, params):
    """Answers with a span of the prompt and says yes or no, each by a coin fixed by the prompt."""
    prompt = messages[-1]["content"]
    if _proposed(prompt):
        return "yes" if _coin(prompt) else "no"
    spans = answer_candidates(prompt)
    return spans[_coin(prompt + "span") * (len(spans) - 1)] if spans else "unknown"


REALISTIC_WRONG = {
    "says yes to every answer": oracle_but(lambda proposed, prompt: "yes"),
    "says no to every answer": oracle_but(lambda proposed, prompt: "no"),
    "says yes to long answers": oracle_but(
        lambda proposed, prompt: "yes" if len(proposed.split()) >= MIN_LONG_WORDS else "no"
    ),
    "guesses": guessing,
    "answers every prompt yes": lambda role, messages, params: "yes",
}


def measured(respond, per_kind: int = 4):
    """The one judge's control record, measured through the real client over `respond`."""
    made = controls_from(PASSAGES, per_kind=per_kind, seed="realistic")
    [record] = asyncio.run(measure(made, ScriptedLLM(respond), threshold=0.6))
    return record


def test_control_items_come_from_the_passages():
    passages = [doc.read_text() for doc in sorted(SAMPLE_DOCS.glob("*.md"))[:4]]

    made = controls_from(passages, per_kind=3, seed="s")

    answers = [c for c in made if c.kind == "answer"]
    accepts = [c for c in made if c.kind == "accept"]
    rejects = [c for c in made if c.kind == "reject"]
    assert len(answers) == len(accepts) == len(rejects) == 3
    assert [(c.question, c.answer) for c in accepts] == [(c.question, c.answer) for c in answers]
    for control in answers:
        assert BLANK in control.question
        filled = control.question.removeprefix("Fill in the blank: ").replace(BLANK, control.answer)
        assert filled in control.passage
    for control in rejects:
        assert control.answer in control.passage
        filled = control.question.removeprefix("Fill in the blank: ").replace(BLANK, control.answer)
        assert filled not in control.passage
    # short wrong spans and whole wrong sentences by turns
    assert [len(c.answer.split()) >= MIN_LONG_WORDS for c in rejects] == [False, True, False]
    assert made == controls_from(passages, per_kind=3, seed="s")


def test_a_judge_that_does_the_job_passes_its_controls():
    record = measured(Oracle().respond)
    assert record.competent and record.correct == record.items == 12
    assert record.by_kind == {"answer": [4, 4], "accept": [4, 4], "reject": [4, 4]}


@pytest.mark.parametrize("habit", list(REALISTIC_WRONG))
def test_a_judge_wrong_in_a_realistic_way_is_below_the_bar(habit):
    record = measured(REALISTIC_WRONG[habit])
    assert not record.competent, (habit, record.by_kind)


def test_a_judge_right_on_most_items_but_one_sided_is_below_the_bar():
    """Always no is right on answers and rejects, 8 of 12 (67%, above the bar overall): it is
    each kind that must reach the bar."""
    record = measured(REALISTIC_WRONG["says no to every answer"])
    assert record.accuracy > record.threshold and record.by_kind["accept"] == [4, 0]


def test_a_judge_below_the_bar_is_left_out_or_marked():
    endpoints = fake_endpoints("http://judges", judges=3)
    able = {"model": "scripted", "competent": True}
    unable = {"model": "scripted", "competent": False}
    latest = [
        {"role": "judge:0", **able},
        {"role": "judge:1", **unable},
        {"role": "judge:2", **able},
    ]
    kept, left_out = deciding_judges(endpoints, latest)
    assert left_out == ["judge:1"] and set(kept) == set(endpoints) - {"judge:1"}
    assert not any(e.below_bar for e in kept.values())
    # none passed: every judge stays, marked, so that the checks it would decide are held
    marked, left_out = deciding_judges(endpoints, [{**row, **unable} for row in latest])
    assert left_out == [] and set(marked) == set(endpoints)
    assert [role for role, e in marked.items() if e.below_bar] == ["judge:0", "judge:1", "judge:2"]
    # a figure of another model says nothing about the judge's present one
    stale = [{**row, "model": "an-earlier-model"} for row in latest]
    assert deciding_judges(endpoints, stale) == (endpoints, [])
    assert deciding_judges(endpoints, []) == (endpoints, [])


def test_a_panel_is_below_the_bar_only_when_every_judge_of_its_present_models_is():
    endpoints = fake_endpoints("http://judges", judges=2)
    able = {"model": "scripted", "competent": True}
    unable = {"model": "scripted", "competent": False}

    def panel(first: dict, second: dict | None = None) -> list[dict]:
        rows = [{"role": "judge:0", **first}]
        return rows + ([{"role": "judge:1", **second}] if second else [])

    assert panel_below_bar(endpoints, panel(unable, unable))
    assert not panel_below_bar(endpoints, panel(able, unable))
    assert not panel_below_bar(endpoints, panel(unable))  # judge:1 not measured
    stale = {"model": "an-earlier-model", "competent": False}
    assert not panel_below_bar(endpoints, panel(stale, stale))
    assert not panel_below_bar(endpoints, [])


def test_a_judge_below_the_accuracy_is_reported_before_verifying(tmp_path, capsys):
    oracle = Oracle()

    def respond(body):
        return "maybe so" if body.get("model") == WEAK else oracle(body)

    docs = [str(d) for d in sorted(SAMPLE_DOCS.glob("*.md"))[:2]]
    home = tmp_path / "home"
    with FakeOpenAIServer(respond) as server:
        endpoint = f'base_url = "{server.base_url}"\napi_key = "k"\n'
        config = tmp_path / "foundry.toml"
        config.write_text(
            '[scope]\nkinds = ["doc_qa"]\n[generate]\nmax_chunks = 2\n'
            f'[roles.generator]\nmodel = "fake-model"\n{endpoint}'
            f'[roles.solver]\nmodel = "fake-model"\n{endpoint}'
            f'[[roles.judges]]\nmodel = "fake-model"\n{endpoint}'
            f'[[roles.judges]]\nmodel = "{WEAK}"\n{endpoint}'
        )
        command = ["run", *docs, "--home", str(home), "--config", str(config)]
        assert main(command) == 0
    err = capsys.readouterr().err
    assert f"judge judge:1 ({WEAK}) got 0 of 12 control items right" in err
    assert "below 60% on answer, accept, reject)" in err and "a stronger model" in err
    assert "judge judge:0 (fake-model) got 12 of 12 control items right (100%;" in err
    lake = Lake(home)
    rows = {r["role"]: r for r in lake.rows("SELECT * FROM judge_controls")}
    assert rows["judge:0"]["competent"] and rows["judge:0"]["correct"] == 12
    assert not rows["judge:1"]["competent"] and rows["judge:1"]["accuracy"] == 0.0
    assert json.loads(rows["judge:0"]["by_kind"]) == {
        "answer": [4, 4],
        "accept": [4, 4],
        "reject": [4, 4],
    }
    # the judge below the bar did not vote: the one above it decided
    voters = lake.rows("SELECT DISTINCT judge FROM verdicts")
    assert voters == [{"judge": "judge:0"}]
    # the taskset says who decided, with its figure, and gives a lone vote no agreement figure
    version = taskset_version(home / "tasksets" / "docqa")
    opened = json.loads((version / "manifest.json").read_text())["judge_agreement"]["open_book"]
    assert opened["mean_agreement"] is None and opened["decisions_with_several_votes"] == 0
    [judge] = opened["judges"]
    assert (judge["role"], judge["model"], judge["controls"]["correct"]) == (
        "judge:0",
        "fake-model",
        12,
    )
    card = (version / "README.md").read_text()
    [line] = [line for line in card.splitlines() if line.startswith("- open_book: ")]
    assert "judge:0 (fake-model, " in line and WEAK not in line
    assert "no agreement figure (no decision had more than one vote)" in line

    assert main(["stats", "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "controls judge:1 (weak-judge): 0 of 12 control items right (0%), BELOW 60%" in out
    page = tmp_path / "report.html"
    assert main(["report", "--home", str(home), "--out", str(page)]) == 0
    assert "control items right" in page.read_text()


# --- a panel below the bar decides no check, in any family -----------------------------------

HONEST_REPLY = (
    "Yes: order 88212 has not shipped yet, so I cancelled it and the refund is on its way."
)
PARAPHRASE = "She was born in the harbour town on the Tessaly coast."


def _graded(spec):
    return lambda llm: grade(trainer_task(QUESTION, GOLD, spec), PARAPHRASE, llm)


JUDGED_CHECKS = {
    "instruction": lambda llm: instruction.check(world_task(), llm, VerifyConfig()),
    "trace_outcome": lambda llm: rate(_trace(HONEST_REPLY), llm),
    "answer equivalence": _graded(LLMEquivalenceSpec()),
    "rubric": _graded(RUBRICS[0]),
    "rubric item by item": _graded(RUBRICS[1]),
}


@pytest.mark.parametrize("check", list(JUDGED_CHECKS))
def test_judges_below_the_bar_decide_no_check(check):
    """Judges that say yes to everything and failed their controls: the check is held before
    any of them is asked; the same judges, trusted as configured, would have passed it."""
    run = JUDGED_CHECKS[check]
    weak = below_the_bar(ScriptedLLM(yes_man, judges=2))
    with pytest.raises(Held, match="held_judge_below_controls"):
        asyncio.run(run(weak))
    assert weak.requests == []
    trusted = ScriptedLLM(yes_man, judges=2)
    asyncio.run(run(trusted))
    assert len(trusted.requests) == 2


def test_a_pass_rate_resting_on_judges_below_the_bar_is_not_measured():
    """A rubric-graded task is not attempted while its judges are below the bar (not even the
    solver is asked); a task its verifier grades without a judge is calibrated as before."""
    config = CalibrateConfig(method="fixed", k=2)
    how = calibration.plan(config, [])

    def calibrated(spec, llm):
        task = trainer_task(QUESTION, GOLD, spec)
        return asyncio.run(calibration.calibrate(task, llm, config, how, SingleTurn(CLOSED_BOOK)))

    weak = below_the_bar(ScriptedLLM(lambda role, messages, params: GOLD))
    with pytest.raises(Held):
        calibrated(RUBRICS[0], weak)
    assert weak.requests == []
    attempts, difficulty = calibrated(ExactOrF1Spec(), weak)
    assert difficulty.passes == len(attempts) == 2
    assert {role for role, _, _ in weak.requests} == {"solver"}


def test_a_panel_below_the_bar_holds_world_and_trace_tasks(tmp_path, oracle_server):
    """The tool-use families' checks (a world task's instruction, a trace's outcome) are held
    as document questions are: recorded `failed`, `held_judge_below_controls`, with no verdict,
    shown in the funnel, left out of the export and taken again by the next run."""
    home = tmp_path / "home"
    ctx = make_context(
        home,
        calibrate={"k": 2, "method": "fixed"},
        worlds={"tasks_per_world": 1, "refine_rounds": 0},
        repair={"max_steps": 0},
    )
    ingest_world_files([str(WORLDS)], ctx)
    ingest_traces([str(SAMPLE_TRACES)], ctx.lake, ctx.config.traces, ctx.run_id, lambda m: None)
    record = measured(REALISTIC_WRONG["answers every prompt yes"])
    ctx.lake.write("judge_controls", [record.model_copy(update={"model": "fake-model"})])
    run_llm_stages(ctx, endpoints_for(oracle_server))

    verified = ctx.lake.rows(
        "SELECT s.status, s.reason FROM status s JOIN tasks t ON t.task_id = s.item_id"
        " WHERE s.stage = 'verify' AND t.kind = 'world_tool_use'"
    )
    assert verified and {(v["status"], v["reason"]) for v in verified} == {("failed", HELD)}
    rated = ctx.lake.rows("SELECT status, reason FROM status WHERE stage = 'trace_tasks'")
    held = [r for r in rated if (r["status"], r["reason"]) == ("failed", HELD)]
    assert held and all(r["reason"] == "near_duplicate_request" for r in rated if r not in held)
    assert ctx.lake.rows("SELECT * FROM verdicts") == []
    assert ctx.lake.rows("SELECT * FROM consensus") == []
    assert ctx.lake.rows("SELECT * FROM difficulty") == []
    stages = funnel(ctx.lake)["stages"]
    assert stages["verify"]["reasons"][f"failed:{HELD}"] == len(verified)
    assert stages["trace_tasks"]["reasons"][f"failed:{HELD}"] == len(held)
    assert len(pending_verify(ctx)) == len(verified)  # the next run takes them again
    exported = export_taskset(
        ctx.lake, "held", home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    assert exported.n_tasks == 0


def test_the_controls_come_before_any_stage_that_asks_the_panel(tmp_path):
    """A trace's outcome is rated while trace tasks are made, before verify: the judges'
    control items are measured first, so a judge below the bar rates none of them."""
    oracle = Oracle()

    def respond(body):
        return "maybe so" if body.get("model") == "weak-judge" else oracle(body)

    ctx = make_context(
        tmp_path / "home",
        scope={"kinds": ["trace_answer", "near_miss", "tool_replay"]},
        calibrate={"k": 2, "method": "fixed"},
        repair={"max_steps": 0},
    )
    ingest_docs([str(p) for p in sorted(SAMPLE_DOCS.glob("*.md"))[:2]], ctx)  # the controls'
    ingest_traces([str(SAMPLE_TRACES)], ctx.lake, ctx.config.traces, ctx.run_id, lambda m: None)
    with FakeOpenAIServer(respond) as server:
        endpoints = endpoints_for(server)
        endpoints["judge:0"] = dataclasses.replace(endpoints["judge:0"], model="weak-judge")
        run_llm_stages(ctx, endpoints)
    [control] = ctx.lake.records("judge_controls")
    assert not control.competent
    rated = ctx.lake.rows("SELECT status, reason FROM status WHERE stage = 'trace_tasks'")
    assert any((r["status"], r["reason"]) == ("failed", HELD) for r in rated)
    assert ctx.lake.rows("""SELECT * FROM verdicts WHERE "check" = 'trace_outcome'""") == []
