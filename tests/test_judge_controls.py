"""Judges measured on control items from the run's own chunks before their verdicts count: a
judge that cannot answer what the passage shows, accepts a wrong answer or refuses a right one is
reported with its figure and the remedy, and votes only where no judge passed its controls;
stats and the report show every judge's figure."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re

import pytest

from data.lake import Lake
from data.spans import answer_candidates
from flows.cli import main
from judges.controls import (
    BLANK,
    MIN_LONG_WORDS,
    controls_from,
    deciding_judges,
    measure,
    panel_below_bar,
)
from tests.conftest import SAMPLE_DOCS
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM, fake_endpoints

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


def test_a_judge_below_the_bar_votes_only_where_no_judge_passed():
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
    # none passed: the panel as configured (no judge would be left to decide)
    assert deciding_judges(endpoints, [{**row, **unable} for row in latest]) == (endpoints, [])
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

    assert main(["stats", "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "controls judge:1 (weak-judge): 0 of 12 control items right (0%), BELOW 60%" in out
    page = tmp_path / "report.html"
    assert main(["report", "--home", str(home), "--out", str(page)]) == 0
    assert "control items right" in page.read_text()
