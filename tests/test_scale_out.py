"""The pipeline on a local Dask cluster of worker processes gives what the default runner
gives: the same requests to the models, the same funnel, the same taskset."""

from __future__ import annotations

import json
import pickle
import shutil
from collections import Counter

import pytest

from data.costs import Budget
from data.export import read_tasks
from data.llm import Endpoint, shared_among
from flows.cli import main
from tests.conftest import SAMPLE_DOCS, make_context

# what a taskset row holds that depends on when and by which run it was made
RUN_COLUMNS = {"created_at", "exported_at", "run_id", "lineage"}


def pipeline_run(tmp_path, name, runner, oracle_server, monkeypatch, capsys):
    """Run `foundry run` on four sample documents with `runner` settings; returns the requests
    the models got, the funnel and the exported rows."""
    corpus = tmp_path / "docs"
    if not corpus.exists():
        corpus.mkdir()
        for doc in sorted(SAMPLE_DOCS.glob("*.md"))[:4]:
            shutil.copy(doc, corpus)
    config = tmp_path / f"{name}.toml"
    config.write_text(
        f"batch_size = 3\n[generate]\nmax_chunks = 10\n[calibrate]\nk = 4\n[runner]\n{runner}\n"
    )
    monkeypatch.setenv("OPENAI_BASE_URL", oracle_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    before = len(oracle_server.requests)
    home = tmp_path / name
    assert main(["run", "--home", str(home), "--config", str(config), str(corpus)]) == 0
    requests = Counter(json.dumps(body, sort_keys=True) for body in oracle_server.requests[before:])
    capsys.readouterr()
    assert main(["stats", "--home", str(home), "--json"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    latest = home / "tasksets" / "docqa" / "latest"
    rows = read_tasks(latest).to_pylist()
    tasks = sorted(
        ({k: v for k, v in row.items() if k not in RUN_COLUMNS} for row in rows),
        key=lambda row: row["task_id"],
    )
    return requests, stages, tasks


@pytest.mark.full
def test_dask_workers_give_the_default_runners_results(
    tmp_path, oracle_server, monkeypatch, capsys
):
    threads = pipeline_run(
        tmp_path, "threads", 'kind = "threads"', oracle_server, monkeypatch, capsys
    )
    dask = pipeline_run(
        tmp_path, "dask", 'kind = "dask"\nworkers = 2', oracle_server, monkeypatch, capsys
    )
    requests, stages, tasks = threads
    assert tasks and sum(requests.values()) > 20 and stages["calibrate"]["done"] > 3
    assert dask[0] == requests  # the same requests, as often
    assert dask[1] == stages
    assert dask[2] == tasks


def test_a_stage_context_travels_to_another_process_without_its_caches(tmp_path):
    ctx = make_context(tmp_path)
    ctx.budget = Budget(max_tokens=100)
    ctx.budget.charge(40, 0.5)
    ctx.harnesses["closed_book"] = object()
    copy = pickle.loads(pickle.dumps(ctx))
    assert copy.harnesses == {} and copy.run_id == ctx.run_id
    assert (copy.budget.tokens, copy.budget.cost_usd) == (40, 0.5)
    copy.budget.charge(60, 0.0)  # its own lock, its own count
    assert copy.budget.exhausted and not ctx.budget.exhausted
    ctx.budget.settle(100, 0.5)  # what the other process recorded
    assert ctx.budget.exhausted


def test_batches_in_other_processes_split_each_servers_request_limit():
    base = {"base_url": "http://gpu-1/v1", "api_key": "k", "model": "m", "timeout_s": 5.0}
    options = {"max_retries": 2, "structured_output": "json_schema", "supports_n": False}
    endpoints = {
        "generator": Endpoint("generator", max_concurrency=32, **base, **options),
        "solver": Endpoint("solver", max_concurrency=3, **base, **options),
    }
    shares = shared_among(endpoints, 4)
    assert {role: e.max_concurrency for role, e in shares.items()} == {"generator": 8, "solver": 1}
    assert shares["generator"].base_url == "http://gpu-1/v1"
