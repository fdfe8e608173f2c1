"""The spend ledger: written ahead of every paid request, read back after a crash, and carried
into the budget of the run that resumes the unfinished one."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from data.costs import (
    carried_spend,
    ledger_path,
    ledger_summary,
    open_ledger,
    read_spend,
    record_sent,
    record_settled,
)
from data.llm import LLMClient, priced
from flows.pipeline import stage_context
from tests.conftest import endpoints_for

CONFIG = """
[prices.fake-model]
input_per_mtok = 100.0
output_per_mtok = 400.0
"""


def test_a_ledger_reads_back_settled_and_open_requests_past_a_torn_line(tmp_path):
    path = tmp_path / "ledger" / "r.jsonl"
    open_ledger(path)
    record_sent(path, "a", "solver", "m", 0.5)
    record_sent(path, "b", "solver", "m", 0.25)
    record_settled(path, "a", 120, 0.1, "")
    with path.open("a") as ledger:
        ledger.write('{"event": "settled", "call": "b", "tok')  # killed in mid-write
    spend = read_spend(path)
    assert (spend.settled_calls, spend.tokens, spend.cost_usd) == (1, 120, 0.1)
    assert (spend.open_calls, spend.open_bound_usd) == (1, 0.25)
    assert spend.at_most_usd == pytest.approx(0.35)
    assert read_spend(tmp_path / "none.jsonl").at_most_usd == 0


def test_a_run_that_dies_mid_batch_leaves_its_spend_to_the_next_runs_budget(
    tmp_path, oracle_server
):
    home, config = tmp_path / "home", tmp_path / "foundry.toml"
    config.write_text(CONFIG)

    with pytest.raises(RuntimeError), stage_context("run", str(home), str(config)) as ctx:
        crashed = ctx.run_id
        endpoints = priced(endpoints_for(oracle_server), ctx.config)

        async def calls() -> None:
            client = LLMClient(endpoints, None, ctx.run_id, ctx.budget, "generate")
            for n in range(3):
                await client.chat("generator", [{"role": "user", "content": f"hello {n}"}])
            await client.aclose()  # its calls never reach the lake: the batch dies here

        asyncio.run(calls())
        spent = ctx.budget.cost_usd
        raise RuntimeError("the process dies before the batch writes its calls")

    assert spent > 0 and not ctx.lake.shards("llm_calls")
    ledger = read_spend(ledger_path(home, crashed))
    assert ledger.settled_calls == 3 and ledger.cost_usd == pytest.approx(spent)

    with stage_context("run", str(home), str(config)) as resumed:
        report = resumed.budget.report()
        assert report["carried_runs"] == 1 and report["carried_usd"] == pytest.approx(spent)
        assert resumed.budget.cost_usd == pytest.approx(spent)  # the limits count it
    summary = ledger_summary(home, resumed.lake.runs(), {})
    assert summary["unfinished_runs"] == 1 and summary["not_in_lake_usd"] == pytest.approx(spent)

    with stage_context("run", str(home), str(config)) as after:  # the resumed run completed
        assert after.budget.carried_runs == 0 and after.budget.cost_usd == 0


def test_a_killed_run_is_carried_but_a_live_one_is_not(tmp_path):
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    runs = []
    for run_id, pid in (("killed", dead_pid), ("alive", 1)):
        path = ledger_path(tmp_path, run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"event": "opened", "pid": pid, "host": _host()}) + "\n")
        record_sent(path, "x", "solver", "m", 0.2)
        runs.append({"run_id": run_id, "command": "run", "state": "running"})
    spend, counted = carried_spend(tmp_path, runs, "run")
    assert counted == 1 and spend.open_bound_usd == pytest.approx(0.2)
    assert carried_spend(tmp_path, runs, "loop") == (type(spend)(), 0)


def _host() -> str:
    import socket

    return socket.gethostname()
