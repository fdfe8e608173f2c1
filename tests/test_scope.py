"""A run's scope: which task kinds it makes and the days of the commits and traces it takes."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest
from pydantic import ValidationError

from data.config import ConfigError, ScopeConfig
from data.lake import Lake, Status
from data.repos import build_sample_repo
from data.traces import Conversation, moment, read_file
from families.bug_injection import pending_injections
from families.code_stages import pending_describe, pending_replays
from families.doc_qa import pending_generate
from families.function_rebuild import pending_rebuilds
from families.trace_stages import pending_intents, pending_trace_tasks
from flows.stages import check_kinds, pending_calibrate, pending_verify
from sources.documents import ingest_docs
from sources.repositories import ingest_repository
from sources.traces import ingest_trace_files
from tests.conftest import SAMPLE_DOCS, make_context
from tests.test_lake import make_task
from tests.test_traces import SAMPLE_TRACES

WINDOW = {"since": date(2026, 11, 21), "until": date(2026, 11, 22)}


def test_window_is_whole_days_inclusive_in_utc():
    scope = ScopeConfig(**WINDOW)
    assert scope.covers("2026-11-21T00:00:00+00:00")
    assert scope.covers(datetime(2026, 11, 22, 23, 59, 59, tzinfo=UTC))
    assert scope.covers("2026-11-23T00:30:00+02:00")  # 22:30 UTC the day before
    assert not scope.covers("2026-11-23T00:00:00Z")
    assert not scope.covers(datetime(2026, 11, 20, 23, 59))  # naive: UTC
    assert not scope.covers(None) and not scope.covers("")  # undated: outside any window
    assert ScopeConfig().covers(None)  # no window: everything
    assert ScopeConfig(kinds=["doc_qa"]).makes("doc_qa", "near_miss")
    assert not ScopeConfig(kinds=["doc_qa"]).makes("near_miss")
    with pytest.raises(ValidationError, match="after until"):
        ScopeConfig(since=date(2026, 11, 2), until=date(2026, 11, 1))
    assert ScopeConfig(kinds=["essay"]).makes("essay")  # kinds are open: a run checks them
    with pytest.raises(ConfigError, match=r"no task family makes 'essay' \(known kinds: doc_qa, "):
        check_kinds(["doc_qa", "essay"])


def test_each_trace_format_gives_the_exchange_its_time(tmp_path):
    assert moment("1764400000000000000") == moment(1764400000) == moment(1764400000000)
    assert moment("2026-11-20") == datetime(2026, 11, 20, tzinfo=UTC)
    assert moment("soon") is None and moment(None) is None
    lines = [
        {"messages": [{"role": "user", "content": "hi"}], "response": "hello", "timestamp": 0},
        {
            "messages": [{"role": "user", "content": "hey"}],
            "response": {
                "created": 1764400000,
                "choices": [{"message": {"role": "assistant", "content": "yo"}}],
            },
        },
        {"messages": [{"role": "user", "content": "yo"}], "response": "sup"},
    ]
    (tmp_path / "chat.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    times = [c.occurred_at for c in read_file(tmp_path / "chat.jsonl")]
    assert times == [datetime(1970, 1, 1, tzinfo=UTC), moment(1764400000), None]
    for name, year in (("proxy-records.jsonl", 2026), ("agent-spans.otlp.jsonl", 2025)):
        read = [c for c in read_file(SAMPLE_TRACES / name) if isinstance(c, Conversation)]
        assert read and all(c.occurred_at.year == year for c in read), name


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """A lake with the sample repository's commits, the sample traces and two documents."""
    root = tmp_path_factory.mktemp("scope")
    ctx = make_context(root / "home")
    repo = build_sample_repo(root / "ledgerline")
    ingest_repository(str(repo), None, ctx)
    ingest_trace_files([str(SAMPLE_TRACES)], ctx)
    ingest_docs([str(p) for p in sorted(SAMPLE_DOCS.glob("*.md"))[:2]], ctx)
    return root / "home"


def scoped(home, **scope):
    return make_context(home, scope=scope)


def test_kinds_out_of_scope_leave_their_stages_nothing_to_take(sources):
    everything = scoped(sources)
    assert pending_generate(everything) and pending_trace_tasks(everything)
    assert len(pending_replays(everything)) == 8 and pending_rebuilds(everything)
    assert pending_injections(everything) and pending_intents(everything)
    docs_only = scoped(sources, kinds=["doc_qa"])
    assert pending_generate(docs_only) == pending_generate(everything)
    code = (pending_replays, pending_rebuilds, pending_injections)
    for pending in (*code, pending_trace_tasks, pending_intents):
        assert pending(docs_only) == [], pending.__name__
    sequences = scoped(sources, kinds=["commit_sequence"])  # built on replayed commits
    assert len(pending_replays(sequences)) == 8 and not pending_rebuilds(sequences)
    assert not pending_injections(sequences)
    bugs = scoped(sources, kinds=["bug_fix"])
    assert pending_injections(bugs) and not pending_rebuilds(bugs) and not pending_replays(bugs)
    assert pending_generate(sequences) == []


def test_the_window_selects_commits_and_traces_by_their_own_time(sources):
    march = scoped(sources, since=date(2024, 3, 10), until=date(2024, 3, 18))
    lake = Lake(sources)
    commits = {
        f"{r['repo_id']}:{r['sha']}": r["authored_at"]
        for r in lake.rows("SELECT repo_id, sha, authored_at FROM commits")
    }
    taken = pending_replays(march)
    assert [commits[item][:10] for item in taken] == ["2024-03-18", "2024-03-15", "2024-03-11"]
    assert pending_generate(march) == pending_generate(scoped(sources))  # documents: no date
    assert pending_trace_tasks(march) == []  # no trace is from March 2024

    november = scoped(sources, **WINDOW)
    in_window = lake.rows(
        "SELECT trace_id FROM traces WHERE occurred_at >= TIMESTAMPTZ '2026-11-21 00:00:00+00'"
        " AND occurred_at < TIMESTAMPTZ '2026-11-23 00:00:00+00' ORDER BY trace_id"
    )
    assert pending_trace_tasks(november) == [r["trace_id"] for r in in_window]
    assert 0 < len(in_window) < len(pending_trace_tasks(scoped(sources)))
    assert pending_replays(november) == [] and pending_describe(november) == []


def test_verify_and_calibrate_take_only_tasks_of_the_kinds_in_scope(tmp_path):
    doc = make_task()
    trace = make_task("What did the agent get wrong?", "the date").model_copy(
        update={"kind": "near_miss", "task_id": "trace-task"}
    )
    ctx = scoped(tmp_path)
    ctx.lake.write("tasks", [doc, trace], "r1")
    assert pending_verify(ctx) == sorted([doc.task_id, trace.task_id])
    assert pending_verify(scoped(tmp_path, kinds=["near_miss"])) == [trace.task_id]
    verified = [Status.now("verify", t.task_id, "done", "ok", "", "r1") for t in (doc, trace)]
    ctx.lake.write("status", verified, "r1")
    assert pending_calibrate(scoped(tmp_path, kinds=["doc_qa"])) == [doc.task_id]
    assert pending_calibrate(scoped(tmp_path, kinds=["tool_replay"])) == []
