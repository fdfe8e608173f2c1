"""Cost that means something: a model's price from the configuration, the shipped table or its
locality; a model with no price is unknown, never $0, wherever a cost is stored or shown; a
run says so at its start, and refuses a cost limit it could not keep."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from data.config import FoundryConfig, ModelPrice
from data.costs import (
    Budget,
    Cost,
    format_ledger,
    is_local,
    ledger_summary,
    price_of,
    prices,
    shipped_price,
    shipped_prices,
)
from data.export import export_taskset
from data.lake import cost_breakdown, format_breakdown, format_funnel, funnel
from data.llm import Endpoint, priced, role_prices
from data.review import render_report
from families import export_kinds, stage_kinds
from flows.cli import main
from sources import groupings
from sources.documents import ingest_docs
from tests.conftest import SAMPLE_DOCS, endpoints_for, make_context, run_llm_stages

DOCS = [str(d) for d in sorted(SAMPLE_DOCS.glob("*.md"))[:1]]
SETTINGS = {"generate": {"max_chunks": 2}, "calibrate": {"k": 2, "method": "fixed"}}
REMOTE = "https://models.example.com/v1"


# --- where a price comes from ---------------------------------------------------------------


def test_a_price_is_the_roles_then_the_configured_then_the_shipped_then_local_else_unknown():
    configured = {"gpt-4o-mini": ModelPrice(input_per_mtok=9.0, output_per_mtok=9.0)}
    own = price_of("gpt-4o-mini", REMOTE, (1.0, None), configured)
    assert (own.input_per_mtok, own.output_per_mtok, own.source) == (1.0, 0.0, "role")
    assert price_of("gpt-4o-mini", REMOTE, (None, None), configured).input_per_mtok == 9.0
    # 0 and 0, once shown as the default in the docs, is as if unset: never a silent $0
    assert price_of("gpt-4o-mini", REMOTE, (0.0, 0.0), configured).input_per_mtok == 9.0
    assert price_of("acme-large", REMOTE, (0.0, 0.0), {}) is None
    shipped = price_of("gpt-4o-mini-2024-07-18", REMOTE, (None, None), {})
    assert (shipped.input_per_mtok, shipped.output_per_mtok) == (0.15, 0.60)
    assert shipped.source.startswith("shipped, as of ")
    # a hosted model's name on this machine is a proxy to the paid API, not a free model
    assert price_of("gpt-4o-mini", "http://127.0.0.1:4000/v1", (None, None), {}).output_per_mtok
    assert price_of("my-model", "http://127.0.0.1:8000/v1", (None, None), {}).source == "local"
    assert price_of("SmolLM2-135M-Instruct", None, (None, None), {}).source == "local"
    assert price_of("my-model", REMOTE, (None, None), {}) is None
    assert price_of("", REMOTE, (None, None), {}) is None


@pytest.mark.parametrize(
    ("server", "local"),
    [
        (None, True),  # the embedded server
        ("http://localhost:8000/v1", True),
        ("http://127.0.0.1:8000/v1", True),
        ("http://127.8.0.1/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://gpu.localhost/v1", True),
        ("http://10.0.0.5:8000/v1", False),  # another machine on the network
        ("http://192.168.1.2/v1", False),
        ("http://0.0.0.0:8000/v1", False),
        (REMOTE, False),
    ],
)
def test_local_means_this_machine_only(server, local):
    assert is_local(server) is local


def test_every_shipped_price_has_a_date_and_a_source():
    assert len(shipped_prices()) >= 10
    for model, price in shipped_prices().items():
        assert price.input_per_mtok > 0 and price.output_per_mtok >= price.input_per_mtok, model
        as_of, _, source = price.source.removeprefix("shipped, as of ").partition(" ")
        assert len(as_of) == 10 and as_of[4] == as_of[7] == "-", model
        assert source.startswith("(https://"), model
    assert shipped_price("claude-3-5-haiku-latest") == shipped_price("claude-3-5-haiku")
    assert shipped_price("gpt-4o-20240806") == shipped_price("gpt-4o")
    assert shipped_price("gpt-4o-mini-realtime") is None  # no guessing by prefix


def test_endpoints_and_roles_are_priced_alike():
    config = FoundryConfig(
        roles={
            "generator": {"base_url": REMOTE, "model": "acme-large"},
            "solver": {"base_url": REMOTE, "model": "gpt-4.1-mini"},
            "judges": [{}],
        },
        prices={"acme-large": {"input_per_mtok": 4.0, "output_per_mtok": 8.0}},
    )
    before = role_prices(config, "SmolLM2-135M-Instruct")
    assert before["generator"].input_per_mtok == 4.0
    assert before["solver"].output_per_mtok == 1.6
    assert before["judge:0"].source == "local"
    bare = Endpoint("solver", REMOTE, "k", "unheard-of", 1, 1.0, 0, "json_schema", False)
    assert not bare.has_price and bare.cost(10, 10) is None and bare.cost(0, 0) == 0.0
    after = priced({"solver": bare, "generator": replace(bare, model="acme-large")}, config)
    assert not after["solver"].has_price
    assert after["generator"].cost(1_000_000, 0) == pytest.approx(4.0)


# --- unknown is not $0 --------------------------------------------------------------------


def test_a_budget_with_an_unpriced_call_knows_only_a_lower_bound():
    budget = Budget()
    budget.charge(100, 0.25)
    assert budget.spent == Cost(0.25) and budget.report()["cost_usd"] == 0.25
    budget.charge(50, None, model="acme-large")
    report = budget.report()
    assert report["cost_usd"] is None and report["cost_usd_at_least"] == 0.25
    assert report["unpriced_models"] == ["acme-large"]
    assert "at least $0.2500 (no price for acme-large)" in budget.describe()
    assert Cost.of(0.0, ["m"]).text() == "unknown (no price for m)"


@pytest.fixture(scope="module")
def unpriced_lake(tmp_path_factory):
    """A lake whose generator has a price and whose judge and solver do not (fake-model on a
    server taken to be elsewhere), with a version exported."""
    from tests.fakes.openai_server import FakeOpenAIServer
    from tests.fakes.oracle import Oracle

    ctx = make_context(tmp_path_factory.mktemp("unpriced") / "home", **SETTINGS)
    ingest_docs(DOCS, ctx)
    with FakeOpenAIServer(Oracle()) as server:
        endpoints = endpoints_for(server)
        endpoints["generator"] = replace(
            endpoints["generator"], price_input_per_mtok=1.0, price_output_per_mtok=2.0
        )
        run_llm_stages(ctx, endpoints)
    version = export_taskset(
        ctx.lake, "docqa", ctx.config.home / "tasksets", kinds=export_kinds(), groupings=groupings()
    ).path
    return ctx, version


def test_a_call_to_a_model_with_no_price_is_stored_with_no_cost(unpriced_lake):
    ctx, _ = unpriced_lake
    rows = ctx.lake.rows(
        "SELECT role, bool_and(cost_usd IS NULL) AS unknown, bool_and(cost_usd > 0) AS paid"
        " FROM llm_calls WHERE NOT cached GROUP BY role ORDER BY role"
    )
    assert {r["role"]: (r["unknown"], r["paid"]) for r in rows} == {
        "generator": (False, True),
        "judge:0": (True, None),
        "solver": (True, None),
    }


def test_stats_and_the_manifest_show_unknown_costs_as_unknown(unpriced_lake):
    ctx, version = unpriced_lake
    summary = funnel(ctx.lake)
    assert summary["llm"]["solver"]["cost_usd"] is None
    assert summary["llm"]["solver"]["unpriced_models"] == ["fake-model"]
    assert summary["llm"]["generator"]["cost_usd"] > 0
    cost = summary["cost"]
    assert cost["cost_usd"] is None and cost["cost_usd_at_least"] > 0
    assert cost["usd_per_accepted_task"] is None and cost["usd_per_accepted_task_at_least"] > 0
    text = format_funnel(summary)
    assert "unknown" in text and "$0.0000" not in text
    assert "all live calls: at least $" in text and "(no price for fake-model)" in text

    breakdown = cost_breakdown(ctx.lake, stage_kinds())
    stages = {row["stage"]: row for row in breakdown["per_stage"]}
    assert stages["calibrate"]["cost_usd"] is None
    assert stages["calibrate"]["unpriced_models"] == ["fake-model"]
    assert stages["generate"]["cost_usd"] > 0 and stages["generate"]["unpriced_models"] == []
    assert "unknown (no price for fake-model)" in format_breakdown(breakdown)

    manifest = json.loads((version / "manifest.json").read_text())
    families = {row["family"]: row for row in manifest["cost"]["per_family"]}
    assert families["doc_qa"]["cost_usd"] is None
    assert families["doc_qa"]["unpriced_models"] == ["fake-model"]


def test_the_report_page_says_unknown(unpriced_lake):
    ctx, version = unpriced_lake
    html = render_report(ctx.lake, version, ctx.config, made_by=stage_kinds()).html
    solver_row = re.search(r"<tr><td>solver</td>(<td[^>]*>[^<]*</td>)+</tr>", html).group(0)
    assert solver_row.endswith(">unknown (no price for fake-model)</td></tr>")
    assert "All runs: at least $" in html
    assert "The cost plotted is the part at known prices only" in html


def test_the_ledger_summary_keeps_unknown_costs_unknown(tmp_path):
    from data.costs import ledger_path, record_sent, record_settled

    path = ledger_path(tmp_path, "r1")
    path.parent.mkdir(parents=True)
    record_sent(path, "a", "solver", "acme-large", None)
    record_settled(path, "a", 30, None, "")
    record_sent(path, "b", "generator", "gpt-4o", 0.01)
    record_settled(path, "b", 20, 0.002, "")
    runs = [{"run_id": "r1", "state": "completed", "command": "run"}]
    summary = ledger_summary(tmp_path, runs, {})
    assert summary["cost_usd"] is None and summary["cost_usd_at_least"] == 0.002
    assert summary["unpriced_models"] == ["acme-large"]
    assert "at least $0.0020 (no price for acme-large)" in format_ledger(summary)


# --- at a run's start ---------------------------------------------------------------------


@pytest.fixture
def elsewhere(monkeypatch, oracle_server):
    """Every role on the fake server, which is taken to be on another machine: its model
    (fake-model) has no price."""
    monkeypatch.setenv("OPENAI_BASE_URL", oracle_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setattr(prices, "is_local", lambda server: False)
    return oracle_server


def run_args(tmp_path, *extra: str) -> list[str]:
    return ["run", "--home", str(tmp_path / "home"), "--config", str(tmp_path / "f.toml"), *extra]


def test_a_run_says_which_models_have_no_price_and_shows_its_cost_unknown(
    tmp_path, elsewhere, capsys
):
    (tmp_path / "f.toml").write_text("[generate]\nmax_chunks = 1\n")
    assert main(run_args(tmp_path, "--max-tokens", "3000", *DOCS)) == 0  # tokens still limit
    captured = capsys.readouterr()
    assert "price: no price for fake-model (generator, solver, judge:0)" in captured.err
    assert "unknown (no price for fake-model)" in captured.out
    assert "stopped at the budget:" in captured.out and "$0.0000" not in captured.out


def test_a_cost_limit_is_refused_when_the_servers_model_has_no_price(tmp_path, elsewhere, capsys):
    (tmp_path / "f.toml").write_text("[generate]\nmax_chunks = 1\n")
    assert main(run_args(tmp_path, "--max-cost", "5", *DOCS)) == 2
    err = capsys.readouterr().err
    assert "needs a price for every model the run calls; none for fake-model" in err
    assert '[prices."fake-model"]' in err
    assert not list((tmp_path / "home").rglob("llm_calls/*.parquet"))  # nothing was asked


def test_a_cost_limit_is_refused_before_the_run_when_a_configured_model_has_no_price(
    tmp_path, capsys
):
    (tmp_path / "f.toml").write_text(
        f'[budget]\nmax_cost_usd = 5.0\n[roles.solver]\nbase_url = "{REMOTE}"\nmodel = "acme"\n'
    )
    assert main(run_args(tmp_path, *DOCS)) == 2
    assert "none for acme (solver)" in capsys.readouterr().err
    assert not (tmp_path / "home").exists()  # refused before anything started


def test_a_cost_limit_runs_once_every_model_has_a_price(tmp_path, elsewhere, capsys):
    (tmp_path / "f.toml").write_text(
        "[generate]\nmax_chunks = 1\n"
        '[prices."fake-model"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n'
    )
    assert main(run_args(tmp_path, "--max-cost", "5", *DOCS)) == 0
    captured = capsys.readouterr()
    assert "no price" not in captured.err + captured.out
