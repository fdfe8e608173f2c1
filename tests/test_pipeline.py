"""The stages end to end over the real lake, against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import shutil

import duckdb
from datasets import load_dataset

from data.export import export_taskset, read_tasks
from data.lake import funnel
from families import export_kinds
from sources import groupings
from sources.documents import ingest_docs
from tests.conftest import SAMPLE_DOCS, endpoints_for, make_context, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle

DOCS = sorted(SAMPLE_DOCS.glob("*"))[:6]


def small_corpus(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for doc in DOCS:
        shutil.copy(doc, folder / doc.name)
    return folder


def shard_count(home):
    return sorted(p.relative_to(home) for p in (home / "lake").rglob("*.parquet"))


def test_documents_to_exported_taskset(tmp_path, oracle_server):
    home = tmp_path / "home"
    ctx = make_context(home, calibrate={"k": 4})
    ingest_docs([str(small_corpus(tmp_path))], ctx)
    run_llm_stages(ctx, endpoints_for(oracle_server))
    result = export_taskset(
        ctx.lake, "docqa", home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )

    assert result.written and result.n_tasks >= 5
    assert (home / "tasksets" / "docqa" / "latest").resolve() == result.path
    manifest = json.loads((result.path / "manifest.json").read_text())
    assert manifest["n_tasks"] == result.n_tasks
    assert sum(manifest["by_band"].values()) == result.n_tasks
    assert manifest["models"]["solver"] == ["fake-model"]
    assert "README.md" in {p.name for p in result.path.iterdir()}

    splits = load_dataset(str(result.path))  # the splits as the card's front matter names them
    assert sorted(splits) == ["eval", "train"]
    assert len(splits["train"]) == manifest["split"]["tasks"]["train"] > 0
    assert len(splits["eval"]) == manifest["split"]["tasks"]["eval"]
    assert set(splits["train"]["split"]) == {"train"} and set(splits["eval"]["split"]) <= {"eval"}
    row = splits["train"][0]
    assert {
        "task_id",
        "kind",
        "prompt",
        "answer",
        "verifier",
        "evidence",
        "source",
        "pass_rate",
        "pass_n",
        "pass_ci_low",
        "pass_ci_high",
        "band",
        "verdicts",
        "lineage",
        "schema_version",
    } <= set(row)
    assert row["prompt"][-1]["role"] == "user"
    assert row["pass_n"] % 2 == 0 and 2 <= row["pass_n"] <= 32  # adaptive: rounds of 2, cap 32
    assert row["pass_ci_low"] <= row["pass_rate"] <= row["pass_ci_high"]
    assert json.loads(row["verdicts"]) and json.loads(row["lineage"])["generator"] == "doc_qa"
    consensus = {c["check"]: c for c in json.loads(row["consensus"])}
    assert consensus["open_book"]["decision"] == "pass"
    assert consensus["closed_book"]["decision"] == "fail"  # no leak
    ids = duckdb.sql(f"SELECT task_id FROM read_parquet('{result.path}/data/*.parquet')")
    assert len(ids.fetchall()) == len(set(ids.fetchall())) == result.n_tasks
    bands = set(splits["train"]["band"]) | set(splits["eval"]["band"])
    assert bands <= {"too_easy", "in_band", "too_hard"}


def test_rerun_makes_no_calls_and_duplicates_nothing(tmp_path, oracle_server):
    home = tmp_path / "home"
    corpus = small_corpus(tmp_path)
    ctx = make_context(home, calibrate={"k": 4})
    ingest_docs([str(corpus)], ctx)
    run_llm_stages(ctx, endpoints_for(oracle_server))
    first = export_taskset(
        ctx.lake, "docqa", home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    calls, shards = len(oracle_server.requests), shard_count(home)

    again = make_context(home, run_id="run-2", calibrate={"k": 4})
    counts = ingest_docs([str(corpus)], again)
    assert counts == {"ingested": len(DOCS)}  # nothing new: no chunk outcomes at all
    assert run_llm_stages(again, endpoints_for(oracle_server)) == {}
    second = export_taskset(
        again.lake, "docqa", home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    assert len(oracle_server.requests) == calls
    assert not second.written and second.path == first.path
    link = home / "tasksets" / "docqa" / "latest"
    link.unlink()
    link.symlink_to("v0000")  # as if a crash came after the new version, before the link
    export_taskset(
        again.lake, "docqa", home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    assert link.resolve() == first.path
    new_shards = set(shard_count(home)) - set(shards)
    assert all(str(p).startswith("lake/status") for p in new_shards)  # re-ingest statuses only
    for table in ("sources", "chunks", "tasks", "verdicts", "attempts", "difficulty"):
        rows = again.lake.rows(f"SELECT count(*) AS n FROM {table}")[0]["n"]
        raw = duckdb.sql(f"SELECT count(*) FROM read_parquet('{home}/lake/{table}/*.parquet')")
        assert rows == raw.fetchall()[0][0], table


def test_a_crash_after_outputs_before_status_does_not_duplicate(tmp_path, oracle_server):
    home = tmp_path / "home"
    ctx = make_context(home)
    ingest_docs([str(small_corpus(tmp_path))], ctx)
    run_llm_stages(ctx, endpoints_for(oracle_server))
    tasks_before = ctx.lake.rows("SELECT task_id FROM tasks ORDER BY task_id")
    # simulate a crash that lost every status of the generate stage: all chunks look pending
    for shard in (home / "lake" / "status").glob("*.parquet"):
        shard.unlink()
    ctx2 = make_context(home, run_id="run-2")
    run_llm_stages(ctx2, endpoints_for(oracle_server))
    assert ctx2.lake.rows("SELECT task_id FROM tasks ORDER BY task_id") == tasks_before
    raw = duckdb.sql(f"SELECT count(*) FROM read_parquet('{home}/lake/tasks/*.parquet')")
    assert raw.fetchall()[0][0] == 2 * len(tasks_before)  # written twice, read once


def test_garbage_model_output_is_recorded_with_reasons(tmp_path):
    garbage = ["malformed", "truncated_json"]
    with FakeOpenAIServer(Oracle(), fault_rate=0.5, fault_kinds=garbage, seed=3) as bad:
        ctx = make_context(tmp_path / "home")
        ingest_docs([str(small_corpus(tmp_path))], ctx)
        counts = run_llm_stages(ctx, endpoints_for(bad))
    assert counts  # the run went on
    statuses = ctx.lake.rows("SELECT stage, status, reason FROM status")
    assert all(row["reason"] for row in statuses)
    generated = [r for r in statuses if r["stage"] == "generate"]
    chunks = ctx.lake.rows("SELECT count(*) AS n FROM chunks")[0]["n"]
    assert len(generated) == chunks  # every chunk has an outcome
    assert set(bad.served) == {None, *garbage}


def test_bad_files_are_recorded_and_duplicates_dropped(tmp_path):
    import os

    corpus = small_corpus(tmp_path)
    (corpus / "empty.md").write_text("")
    (corpus / "binary.txt").write_bytes(b"\x00\x01\x02")
    (corpus / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    os.mkfifo(corpus / "pipe.md")
    (corpus / "loop.md").symlink_to(corpus / "loop.md")
    shutil.copy(DOCS[0], corpus / "copy-of-first.md")
    ctx = make_context(tmp_path / "home")
    counts = ingest_docs([str(corpus)], ctx)
    assert counts["ingested"] == len(DOCS)
    for reason in (
        "empty",
        "binary",
        "undecodable",
        "not_a_regular_file",
        "symlink_loop",
        "duplicate_document",
    ):
        assert counts[f"rejected:{reason}"] == 1, reason
    stages = funnel(ctx.lake)["stages"]
    assert stages["ingest"]["rejected"] == 6
    assert stages["chunk"]["done"] == ctx.lake.rows("SELECT count(*) n FROM chunks")[0]["n"]


def test_near_duplicate_chunks_are_rejected(tmp_path):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    shutil.copy(SAMPLE_DOCS / "halvard-bakeries.md", corpus)
    shutil.copy(SAMPLE_DOCS / "halvard-bakeries-copy.md", corpus)
    ctx = make_context(tmp_path / "home")
    counts = ingest_docs([str(corpus)], ctx)
    assert counts["chunk:rejected:exact_duplicate"] == 1  # the unchanged first half
    assert counts["chunk:rejected:near_duplicate"] == 1  # one number differs in the second
    (near,) = ctx.lake.rows("SELECT detail FROM status WHERE reason = 'near_duplicate'")
    kept = {r["chunk_id"] for r in ctx.lake.rows("SELECT chunk_id FROM chunks")}
    assert near["detail"].split(" to ")[1] in kept


def test_equivalence_verified_tasks_flow_through(tmp_path, oracle_server):
    home = tmp_path / "home"
    ctx = make_context(home, calibrate={"k": 2}, generate={"verifier": "llm_equivalence"})
    ingest_docs([str(small_corpus(tmp_path))], ctx)
    counts = run_llm_stages(ctx, endpoints_for(oracle_server))
    assert not any(k.startswith("failed:") for k in counts)
    result = export_taskset(
        ctx.lake, "docqa", home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    table = read_tasks(result.path)
    specs = [json.loads(v) for v in table.column("verifier").to_pylist()]
    assert result.n_tasks > 0 and {s["type"] for s in specs} == {"llm_equivalence"}
    prompts = [json.dumps(b["messages"]) for b in oracle_server.requests]
    assert any("<gold_answer>" in p for p in prompts)  # the panel was asked
