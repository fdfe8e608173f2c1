"""Judges measured on control items from the run's own chunks before their verdicts count: a
judge that cannot answer what the passage shows, or accepts a wrong answer, is reported with its
figure and the remedy, and stats and the report show every judge's figure."""

from __future__ import annotations

import json

from data.lake import Lake
from flows.cli import main
from judges.controls import BLANK, controls_from
from tests.conftest import SAMPLE_DOCS
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle

WEAK = "weak-judge"


def test_control_items_come_from_the_passages():
    passages = [doc.read_text() for doc in sorted(SAMPLE_DOCS.glob("*.md"))[:4]]

    made = controls_from(passages, per_kind=3, seed="s")

    answers = [c for c in made if c.kind == "answer"]
    rejects = [c for c in made if c.kind == "reject"]
    assert len(answers) == len(rejects) == 3
    for control in answers:
        assert BLANK in control.question
        filled = control.question.removeprefix("Fill in the blank: ").replace(BLANK, control.answer)
        assert filled in control.passage
    for control in rejects:
        assert control.answer in control.passage
        filled = control.question.removeprefix("Fill in the blank: ").replace(BLANK, control.answer)
        assert filled not in control.passage
    assert made == controls_from(passages, per_kind=3, seed="s")


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
    assert f"judge judge:1 ({WEAK}) got 0 of 8 control items right" in err
    assert "a stronger model" in err and "(0%, below 60%)" in err
    assert "judge judge:0 (fake-model) got 8 of 8 control items right (100%)\n" in err
    rows = {r["role"]: r for r in Lake(home).rows("SELECT * FROM judge_controls")}
    assert rows["judge:0"]["competent"] and rows["judge:0"]["correct"] == 8
    assert not rows["judge:1"]["competent"] and rows["judge:1"]["accuracy"] == 0.0
    assert json.loads(rows["judge:0"]["by_kind"]) == {"answer": [4, 4], "reject": [4, 4]}

    assert main(["stats", "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "controls judge:1 (weak-judge): 0 of 8 control items right (0%), BELOW 60%" in out
    page = tmp_path / "report.html"
    assert main(["report", "--home", str(home), "--out", str(page)]) == 0
    assert "control items right" in page.read_text()
