"""`foundry run --plan`: the estimate before a run, checked against the run it estimates."""

from __future__ import annotations

import json
import math

from data.cost_breakdown import SHARED, cost_breakdown
from data.endpoints import priced
from data.plan import DEFAULT_MARGIN
from families import stage_kinds
from flows.cli import main
from sources.documents import estimate_chunks, ingest_docs
from tests.conftest import SAMPLE_DOCS, endpoints_for, make_context, run_llm_stages

DOCS = sorted(SAMPLE_DOCS.glob("*.md"))
SETTINGS = {
    "calibrate": {"k": 4, "method": "fixed"},
    "prices": {"fake-model": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}},
}
CONFIG = """
[calibrate]
k = 4
method = "fixed"
[prices.fake-model]
input_per_mtok = 2.0
output_per_mtok = 8.0
"""


def planned(home, config, docs, capsys) -> dict:
    assert (
        main(
            [
                "run",
                "--plan",
                "--json",
                "--home",
                str(home),
                "--config",
                str(config),
                *map(str, docs),
            ]
        )
        == 0
    )
    return json.loads(capsys.readouterr().out)


def actual(ctx) -> dict:
    return ctx.lake.rows(
        "SELECT count(*) AS calls, sum(cost_usd) AS cost FROM llm_calls"
        " WHERE run_id = ? AND NOT cached",
        [ctx.run_id],
    )[0]


def test_the_plan_holds_the_run_it_estimates(tmp_path, oracle_server, capsys, monkeypatch):
    home, config = tmp_path / "home", tmp_path / "foundry.toml"
    config.write_text(CONFIG)
    monkeypatch.setenv("OPENAI_BASE_URL", oracle_server.base_url)  # every role: the fake model
    monkeypatch.setenv("FOUNDRY_MODEL", "fake-model")

    # no earlier run: the configuration's defaults, a wide range
    first = planned(home, config, DOCS[:2], capsys)
    assert first["basis"].startswith("defaults") and first["units"]["docs"] > 0
    assert not (home / "lake").exists() or not list((home / "lake").rglob("*.parquet"))
    ctx = make_context(home, "run-1", **SETTINGS)
    ingest_docs([str(d) for d in DOCS[:2]], ctx)
    run_llm_stages(ctx, priced(endpoints_for(oracle_server), ctx.config))
    spent = actual(ctx)
    totals = first["totals"]
    assert totals["low_calls"] <= spent["calls"] <= totals["high_calls"]
    assert totals["high_calls"] / totals["low_calls"] == DEFAULT_MARGIN**2 * 1.5**2

    # then the lake's measured rates, for other documents of the same kind
    second = planned(home, config, DOCS[2:4], capsys)
    assert second["basis"] == "measured over 1 earlier run(s)"
    ctx = make_context(home, "run-2", **SETTINGS)
    ingest_docs([str(d) for d in DOCS[2:4]], ctx)
    run_llm_stages(ctx, priced(endpoints_for(oracle_server), ctx.config))
    spent = actual(ctx)
    totals = second["totals"]
    assert totals["low_calls"] <= spent["calls"] <= totals["high_calls"]
    assert totals["low_cost_usd"] <= spent["cost"] <= totals["high_cost_usd"] and spent["cost"] > 0
    stages = {s["stage"] for s in second["stages"]}
    made = {r["stage"] for r in ctx.lake.rows("SELECT DISTINCT stage FROM llm_calls")}
    assert made <= stages  # every stage that called a model was foreseen

    # what the calls cost, per stage and per family, each with its cost per accepted task
    breakdown = cost_breakdown(ctx.lake, stage_kinds())
    total = ctx.lake.rows("SELECT sum(cost_usd) AS usd FROM llm_calls WHERE NOT cached")[0]["usd"]
    for rows in breakdown.values():
        assert math.isclose(sum(r["cost_usd"] for r in rows), total, rel_tol=1e-6)
    families = {r["family"]: r for r in breakdown["per_family"]}
    assert set(families) <= {"doc_qa", SHARED} and families["doc_qa"]["accepted_tasks"] > 0
    assert families["doc_qa"]["usd_per_accepted_task"] == round(
        families["doc_qa"]["cost_usd"] / families["doc_qa"]["accepted_tasks"], 6
    )
    stages = {r["stage"] for r in breakdown["per_stage"]}
    assert {"generate", "verify", "calibrate"} <= stages
    calibrated = ctx.lake.rows(
        "SELECT count(*) AS n FROM llm_calls c JOIN tasks t ON t.task_id = c.item"
        " WHERE c.stage = 'calibrate'"
    )[0]["n"]
    assert (
        calibrated
        == ctx.lake.rows("SELECT count(*) AS n FROM llm_calls WHERE stage = 'calibrate'")[0]["n"]
        > 0
    )  # every solver call names the task it attempted

    # what is in the lake already adds nothing
    again = planned(home, config, DOCS[:4], capsys)
    assert again["units"]["docs"] == 0 and again["totals"]["calls"] == 0


def test_chunks_are_estimated_from_sizes_and_copies_count_once(tmp_path):
    ctx = make_context(tmp_path / "home")
    text = "A sentence of about forty characters ok.\n\n" * 100  # 4,200 bytes
    for name in ("a.md", "copy-of-a.md"):
        (tmp_path / name).write_text(text)
    (tmp_path / "b.pdf").write_bytes(b"%PDF" + b"\0" * 20_000)
    per_chunk = ctx.config.ingest.chunk_chars * 0.65
    expected = math.ceil(len(text) / per_chunk + 20_004 * 0.1 / per_chunk)
    assert estimate_chunks([str(tmp_path)], ctx.config, ctx.lake) == expected
