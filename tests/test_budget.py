"""Budgets: a run stops at its token budget with nothing half-done, its export holds only
finished tasks, and the next run finishes the same taskset a run without a budget makes."""

from __future__ import annotations

from data.costs import Budget
from data.export import export_taskset, read_tasks
from data.lake import funnel
from families import export_kinds
from flows.cli import main
from sources import groupings
from sources.documents import ingest_docs
from tests.conftest import SAMPLE_DOCS, endpoints_for, make_context, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle

SETTINGS = {"generate": {"max_chunks": 6}, "calibrate": {"k": 4}}
DOCS = [str(d) for d in sorted(SAMPLE_DOCS.glob("*.md"))[:2]]


def task_ids(ctx):
    result = export_taskset(
        ctx.lake, "docqa", ctx.config.home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    return sorted(read_tasks(result.path)["task_id"].to_pylist())


def test_a_run_stops_at_its_budget_and_the_next_run_finishes_the_job(tmp_path):
    with FakeOpenAIServer(Oracle()) as server:
        clean = make_context(tmp_path / "clean", **SETTINGS)
        ingest_docs(DOCS, clean)
        run_llm_stages(clean, endpoints_for(server))
        clean_requests = len(server.requests)
        expected = task_ids(clean)
        full = funnel(clean.lake)["cost"]["tokens"]

        budgeted = make_context(tmp_path / "budgeted", **SETTINGS)
        budgeted.budget = Budget(max_tokens=full // 3)
        ingest_docs(DOCS, budgeted)
        requests_before = len(server.requests)
        run_llm_stages(budgeted, endpoints_for(server))
        assert budgeted.budget.exhausted and budgeted.budget.tokens >= full // 3
        spent = len(server.requests) - requests_before
        assert spent < clean_requests  # no request after the stop but those in flight
        partial = task_ids(budgeted)
        assert len(partial) < len(expected) and set(partial) <= set(expected)

        resumed = make_context(tmp_path / "budgeted", run_id="run-2", **SETTINGS)
        run_llm_stages(resumed, endpoints_for(server))
        assert task_ids(resumed) == expected
        # every reply made before the stop is reused (the cache), none is asked for twice
        assert len(server.requests) - requests_before == clean_requests
    cost = funnel(resumed.lake)["cost"]
    assert cost["accepted_tasks"] > 0 and cost["tokens_per_accepted_task"] > 0


def test_foundry_run_with_a_token_budget_says_where_it_stopped(
    tmp_path, monkeypatch, oracle_server, capsys
):
    monkeypatch.setenv("OPENAI_BASE_URL", oracle_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    argv = ["run", "--home", str(tmp_path / "home"), "--max-tokens", "2000", *DOCS]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "stopped at the budget:" in out and "the rest is pending for the next run" in out
    assert "taskset: " in out
