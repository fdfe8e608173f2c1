"""`foundry run --plan`: the estimate before a run, checked against the run it estimates."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from data.config import FoundryConfig
from data.lake import SHARED, cost_breakdown
from data.llm import priced
from data.plan import (
    DEFAULT_MARGIN,
    DEFAULT_TEST_RUN_S,
    REPLAY_TEST_RUNS,
    Work,
    default_calls,
    format_plan,
    unknown_stages,
)
from data.repos import build_sample_repo, ingest_repo
from families import stage_kinds
from flows import pipeline
from flows.cli import main
from flows.pipeline import run_sandbox_stage, stage_context
from flows.run_plan import estimate_run
from flows.stages import llm_stages, sandbox_named, sandbox_stages
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


# --- every stage, sandbox time, unknown prices ---------------------------------------------

DEMO = Path(__file__).resolve().parent.parent / "data" / "samples" / "demo.toml"
MADE_BY_MODELS = {"controls", "describe", "intents", "trace_tasks", "world_tasks"}


def test_every_registered_stage_has_a_default_estimate():
    config = FoundryConfig()
    work = Work({"docs": 10, "repos": 10, "traces": 10, "worlds": 2}, repositories=2)
    unshaped = [s.name for s in llm_stages() if default_calls(config, work, s.name) is None]
    assert unshaped == []  # a new stage needs its shape in data/plan/defaults.py
    assert unknown_stages(config, [s.name for s in sandbox_stages()]) == []


def test_a_fresh_plan_covers_every_stage_that_calls_a_model_and_the_sandbox(tmp_path, capsys):
    argv = ["run", "--plan", "--home", str(tmp_path / "home"), "--config", str(DEMO)]
    assert main([*argv, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    planned = {s["stage"] for s in plan["stages"] if s["calls"] > 0}
    assert MADE_BY_MODELS | {"generate", "verify", "calibrate", "review", "repair"} <= planned
    assert {s["basis"] for s in plan["stages"]} == {"default"}
    sandbox = plan["sandbox"]
    assert {s["stage"] for s in sandbox["stages"]} == {
        "replay",
        "rebuild",
        "inject",
        "verify",
        "calibrate",
    }
    assert sandbox["seconds_per_test_run"] == DEFAULT_TEST_RUN_S
    assert sandbox["basis"].startswith(f"{DEFAULT_TEST_RUN_S:g} s per test run, the default")
    assert sandbox["seconds"] == pytest.approx(sandbox["test_runs"] * DEFAULT_TEST_RUN_S, 0.01)
    assert plan["totals"]["cost_usd"] == 0.0  # the embedded model: free, and known to be
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "sandbox: " in text and "s per test run, the default" in text


def test_the_plan_takes_sandbox_time_from_the_runs_that_recorded_it(tmp_path, monkeypatch):
    def replayed(stage, ctx):  # the stage's work, without the sandbox: a known time
        time.sleep(0.2)
        return {}

    monkeypatch.setattr(pipeline, "sandbox_task", replayed)
    (tmp_path / "f.toml").write_text("[code]\nmax_replays = 2\n")
    with stage_context("replay", str(tmp_path / "home"), str(tmp_path / "f.toml")) as ctx:
        repo = str(build_sample_repo(tmp_path / "ledgerline"))
        ingest_repo(repo, ctx.lake, ctx.config.home, ctx.run_id)
        run_sandbox_stage(sandbox_named("replay"), ctx)
    (run,) = ctx.lake.runs()
    timed = json.loads(run["summary"])["sandbox"]["replay"]
    assert timed["items"] == 2 and 0.2 <= timed["seconds"] < 1.0
    plan = estimate_run({"repos": [repo]}, ctx.config)
    per_run = timed["seconds"] / (timed["items"] * REPLAY_TEST_RUNS)
    assert plan.sandbox.seconds_per_test_run == pytest.approx(per_run)
    assert plan.sandbox.basis.endswith("s per test run, measured over 1 earlier run(s)")


def test_a_plan_on_a_model_with_no_price_says_its_cost_is_unknown(tmp_path):
    config = FoundryConfig(
        home=tmp_path / "home",
        roles={"generator": {"base_url": "https://models.example.com/v1", "model": "acme"}},
        generate={"max_chunks": 2},
    )
    plan = estimate_run({"docs": [str(d) for d in DOCS[:1]]}, config)
    generate = next(s for s in plan.stages if s.stage == "generate")
    assert generate.to_json()["cost_usd"] is None and not generate.cost.known
    totals = plan.to_json()["totals"]
    assert totals["cost_usd"] is None and totals["unpriced_models"] == ["acme"]
    assert totals["high_cost_usd"] is None
    text = format_plan(plan)
    assert "cost: unknown (no price for acme)" in text
    assert 'set its price in foundry.toml: [prices."acme"]' in text
