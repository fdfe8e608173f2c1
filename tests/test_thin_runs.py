"""A run whose judges all fail their control items: the judges decide nothing (a
fill-in-the-blank of a verbatim sentence is accepted by construction, any other question is
held, and so is every review that needs a judge), and a thin taskset explains itself in the
run's last lines, `foundry stats` and the report page."""

from __future__ import annotations

from data.lake import Lake
from flows.cli import main
from judges.panel import HELD
from tests.conftest import SAMPLE_DOCS
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle

WEAK = "weak-judge"
DOCS = [str(d) for d in sorted(SAMPLE_DOCS.glob("*.md"))[:2]]


def run_with_a_weak_judge(tmp_path, question_style: str, explain_below: int = 50) -> Lake:
    oracle = Oracle()

    def respond(body):
        return "maybe so" if body.get("model") == WEAK else oracle(body)

    home = tmp_path / "home"
    with FakeOpenAIServer(respond) as server:
        endpoint = f'base_url = "{server.base_url}"\napi_key = "k"\n'
        config = tmp_path / "foundry.toml"
        config.write_text(
            '[scope]\nkinds = ["doc_qa"]\n'
            f'[generate]\nmax_chunks = 2\nquestion_style = "{question_style}"\n'
            "[calibrate]\nmethod = 'fixed'\nk = 2\n[repair]\nmax_steps = 0\n"
            f"[export]\nexplain_below = {explain_below}\n"
            f'[roles.generator]\nmodel = "fake-model"\n{endpoint}'
            f'[roles.solver]\nmodel = "fake-model"\n{endpoint}'
            f'[[roles.judges]]\nmodel = "{WEAK}"\n{endpoint}'
        )
        assert main(["run", *DOCS, "--home", str(home), "--config", str(config)]) == 0
    return Lake(home)


def verify_outcomes(lake: Lake) -> set[tuple[str, str]]:
    rows = lake.rows("SELECT status, reason FROM status WHERE stage = 'verify'")
    return {(row["status"], row["reason"]) for row in rows}


def test_written_questions_are_held_and_the_thin_run_says_why(tmp_path, capsys):
    lake = run_with_a_weak_judge(tmp_path, "question")
    assert verify_outcomes(lake) == {("failed", HELD)}
    assert lake.rows("SELECT count(*) AS n FROM verdicts")[0]["n"] == 0  # no judge decided
    captured = capsys.readouterr()
    assert "no judge passed its controls, so none decides alone" in captured.err
    assert "every check a judge would decide" in captured.err
    out = captured.out
    explanation = out[out.index("only 0 tasks exported") :]
    held = lake.rows("SELECT count(*) AS n FROM status WHERE stage = 'verify'")[0]["n"]
    assert f"verify: {held} held_judge_below_controls" in explanation
    assert f"verify: judge judge:0 ({WEAK}) got 0 of" in explanation
    assert "a stronger judge model ([[roles.judges]]" in explanation
    assert "raise [generate] max_chunks" in explanation  # the sample docs hold more chunks

    home = str(tmp_path / "home")
    assert main(["stats", "--home", home, "--config", str(tmp_path / "foundry.toml")]) == 0
    stats = capsys.readouterr().out
    assert explanation.strip() in stats
    assert f"document questions by form: question: fill {held} (100%, 0 accepted)" in stats
    page = tmp_path / "report.html"
    config = str(tmp_path / "foundry.toml")
    assert main(["report", "--home", home, "--config", config, "--out", str(page)]) == 0
    assert "Why so few tasks" in page.read_text()


def test_a_verbatim_cloze_is_accepted_by_construction_and_reviewed_without_a_judge(
    tmp_path, capsys
):
    lake = run_with_a_weak_judge(tmp_path, "cloze", explain_below=1)
    assert verify_outcomes(lake) == {("done", "accepted_by_construction")}
    checks = lake.rows('SELECT DISTINCT "check" FROM verdicts')
    assert checks == [{"check": "closed_book"}]  # the leak gate alone was asked
    # no judge distils its failed attempts into rubric items: the review says it did not
    reviews = lake.rows("SELECT status, reason FROM status WHERE stage = 'review'")
    assert reviews and {(r["status"], r["reason"]) for r in reviews} == {("done", "reviewed")}
    errors = [r["rubric_error"] for r in lake.rows("SELECT rubric_error FROM reviews")]
    assert errors and all(e == "" or e.startswith(f"not extracted: {HELD}") for e in errors)
    assert lake.rows("SELECT * FROM rubrics") == []
    out = capsys.readouterr().out
    assert "tasks exported (fewer than" not in out  # a taskset big enough is not explained
    assert main(["stats", "--home", str(tmp_path / "home")]) == 0
    stats = capsys.readouterr().out
    assert "document questions by form: cloze" in stats
    unextracted = sum(e.startswith("not extracted") for e in errors)
    assert f"{unextracted} not extracted, every judge below its control bar" in stats
