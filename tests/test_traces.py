"""Production traces: reading the three formats, scrubbing, ingestion and intent clustering."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from data.config import TracesConfig
from data.lake import Lake, ProxyCall
from data.scrub import Scrubber, luhn_valid
from data.traces import Conversation, Malformed, ingest_traces, read_file
from families.trace_stages import INTENTS
from generators.intents import cluster_requests, keyword_label
from tests.conftest import make_context
from tests.fakes.scripted_llm import ScriptedLLM

SAMPLE_TRACES = Path(__file__).resolve().parent.parent / "data" / "samples" / "traces"

# Every secret and personal datum planted in data/samples/traces (digits also without spaces)
PLANTED = [
    "+44 20 7946 0958",
    "4111 1111 1111 1111",
    "4111111111111111",
    "maria.olsen@example.org",
    "415-555-0132",
    "sk-proj-Xy7Qw2Lm9Tz4Rb8Vn3Kd6Hs1Jf5Gc0Pa",
    "j.kowalski@example.net",
    "Winter2026!",
    "(415) 555-0199",
    "tom.reyes@example.com",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjdXN0LTQ0MSJ9",
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    "finance@halvard-bakeries.example",
    "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
]


def read_all(path: Path) -> tuple[list[Conversation], list[Malformed]]:
    items = list(read_file(path))
    return (
        [i for i in items if isinstance(i, Conversation)],
        [i for i in items if isinstance(i, Malformed)],
    )


# --- scrubbing ---------------------------------------------------------------------------


def test_each_kind_of_secret_becomes_its_placeholder():
    scrubber = Scrubber(custom={"employee_id": r"\bEMP-\d{5}\b"})
    counts: Counter = Counter()
    text = scrubber.scrub(
        "mail jane.doe@example.com or call (415) 555-0132; card 4242 4242 4242 4242;"
        " key sk-ant-api03-abcdefghijklmnopqrstuvwxyz; Authorization: Bearer abcdef0123456789xyz;"
        " AKIAIOSFODNN7EXAMPLE; password: hunter22!; EMP-12345;"
        " -----BEGIN PRIVATE KEY-----\nMIIEvQ\n-----END PRIVATE KEY-----",
        counts,
    )
    for kind in ("EMAIL", "PHONE", "CARD", "API_KEY", "BEARER_TOKEN", "AWS_ACCESS_KEY"):
        assert f"[{kind}]" in text
    assert "password: [SECRET]" in text and "[EMPLOYEE_ID]" in text and "[PRIVATE_KEY]" in text
    assert counts["EMAIL"] == counts["CARD"] == counts["PHONE"] == 1
    assert scrubber.scrub(text) == text  # placeholders match no pattern


def test_what_only_looks_like_a_secret_is_kept():
    scrubber = Scrubber()
    kept = (
        "tracking DC4471902, order ORD-20931, 4111 1111 1111 1112 (fails Luhn), on 20231104,"
        " commit 3f2a9c1d4e5b6a7980f1e2d3c4b5a69788796a5b; never share your password: change it"
    )
    assert scrubber.scrub(kept) == kept
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")


def test_scrub_value_reaches_nested_arguments():
    counts: Counter = Counter()
    value = Scrubber().scrub_value({"to": ["a@b.io"], "n": 3, "note": {"k": "x@y.org"}}, counts)
    assert value == {"to": ["[EMAIL]"], "n": 3, "note": {"k": "[EMAIL]"}}
    assert counts["EMAIL"] == 2


# --- formats -----------------------------------------------------------------------------


def test_openai_jsonl_shapes_and_bad_lines():
    found, bad = read_all(SAMPLE_TRACES / "support-chat.jsonl")
    assert len(found) == 13  # 12 exchanges, one logged twice
    assert {(b.origin.rsplit(":", 1)[1], b.reason) for b in bad} == {
        ("4", "invalid_json"),
        ("8", "no_user_message"),
    }
    tooled = [c for c in found if any(m["tool_calls"] for m in c.messages)]
    assert tooled and all(c.tools for c in tooled)
    call = next(m["tool_calls"][0] for m in tooled[0].messages if m["tool_calls"])
    assert isinstance(call["arguments"], dict) and call["call_id"]
    assert all(c.messages[-1]["role"] == "assistant" for c in found)


def test_otel_spans_current_and_indexed_conventions():
    found, bad = read_all(SAMPLE_TRACES / "agent-spans.otlp.jsonl")
    assert len(found) == 11 and all(c.format == "otel" for c in found)
    assert {b.reason for b in bad} == {"no_genai_spans", "invalid_json"}
    # the last chat span of a trace holds its whole history, tool results included
    multi = [c for c in found if sum(m["role"] == "tool" for m in c.messages) == 2]
    assert multi
    roles = [m["role"] for m in multi[0].messages]
    assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"


def test_otel_single_span_with_plain_attributes(tmp_path):
    span = {
        "name": "chat m",
        "spanId": "1",
        "attributes": {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "hi there",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "hello",
        },
    }
    (tmp_path / "span.json").write_text(json.dumps(span))
    found, bad = read_all(tmp_path / "span.json")
    assert not bad and [c.messages[-1]["content"] for c in found] == ["hello"]
    assert found[0].model == "m"


def test_proxy_records_one_conversation_per_rollout(tmp_path):
    found, bad = read_all(SAMPLE_TRACES / "proxy-records.jsonl")
    assert len(found) == 11 and [b.reason for b in bad] == ["no_successful_call"]
    # the same records as a parquet shard of the proxy_calls table
    rows = [json.loads(line) for line in (SAMPLE_TRACES / "proxy-records.jsonl").open()]
    calls = [ProxyCall.model_validate(r) for r in rows]
    table = pa.Table.from_pylist([c.to_row() for c in calls], schema=ProxyCall.arrow_schema())
    pq.write_table(table, tmp_path / "shard.parquet")
    from_parquet, bad = read_all(tmp_path / "shard.parquet")
    assert len(from_parquet) == 11 and [b.reason for b in bad] == ["no_successful_call"]
    assert [c.messages for c in from_parquet] == [c.messages for c in found]
    # a rollout's calls spread over the proxy's shards are read together
    shards = tmp_path / "proxy_calls"
    shards.mkdir()
    pq.write_table(table.take(list(range(0, len(calls), 2))), shards / "a.parquet")
    pq.write_table(table.take(list(range(1, len(calls), 2))), shards / "b.parquet")
    counts = ingest_traces([str(shards)], Lake(tmp_path / "home"), TracesConfig(), "r", print)
    assert counts == {"done:ingested": 11, "rejected:no_successful_call": 1}


# --- ingestion ---------------------------------------------------------------------------


def test_ingest_scrubs_before_storing_and_resumes(tmp_path):
    lake = Lake(tmp_path)
    counts = ingest_traces([str(SAMPLE_TRACES)], lake, TracesConfig(), "r1", lambda m: None)
    assert counts["done:ingested"] == 34 and counts["rejected:duplicate_trace"] == 1
    assert counts["rejected:invalid_json"] == 2
    stored = json.dumps(lake.rows("SELECT * FROM traces"), default=str)
    leaked = [p for p in PLANTED if p in stored]
    assert not leaked
    scrubbed = Counter()
    for row in lake.rows("SELECT scrubbed FROM traces"):
        scrubbed.update(json.loads(row["scrubbed"]))
    assert {"EMAIL", "PHONE", "CARD", "API_KEY", "AWS_ACCESS_KEY", "PRIVATE_KEY"} <= set(scrubbed)
    bad = lake.rows(
        "SELECT item_id, reason FROM status WHERE stage = 'trace_ingest'"
        " AND reason = 'invalid_json' ORDER BY 1"
    )
    assert [r["item_id"].rsplit("/", 1)[1] for r in bad] == [
        "agent-spans.otlp.jsonl:7",
        "support-chat.jsonl:4",
    ]
    shards = {t: len(lake.shards(t)) for t in ("traces", "status")}
    again = ingest_traces([str(SAMPLE_TRACES)], lake, TracesConfig(), "r2", lambda m: None)
    assert again == counts
    assert {t: len(lake.shards(t)) for t in ("traces", "status")} == shards


# --- intents -----------------------------------------------------------------------------


def test_clusters_follow_distance_and_centrality():
    a, b = np.eye(384, dtype=np.float32)[:2]
    vectors = np.stack([a, a * 0.9 + b * 0.1, b, b * 0.95 + a * 0.05, a])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    clusters = cluster_requests(vectors, 0.5)
    assert sorted(sorted(c.members) for c in clusters) == [[0, 1, 4], [2, 3]]
    assert clusters[0].members[-1] == 1  # the least central member last
    assert [c.members for c in cluster_requests(vectors[:1], 0.5)] == [[0]]


def test_keyword_label_names_what_sets_a_cluster_apart():
    inside = ["Refund order 12 please", "I want a refund for my order"]
    assert keyword_label(inside, ["Where is my parcel?", "Track my order"]).startswith("refund")


def test_intents_stage_labels_each_cluster_and_records_fallbacks(tmp_path):
    ctx = make_context(tmp_path)
    ingest_traces([str(SAMPLE_TRACES)], ctx.lake, ctx.config.traces, "r1", lambda m: None)

    def respond(role, messages, params):
        shown = messages[-1]["content"].split("Requests:\n", 1)[1]
        return json.dumps({"label": "refunds" if "efund" in shown else "x " * 12})

    llm = ScriptedLLM(respond)
    [clustering] = INTENTS.pending(ctx)
    loaded = INTENTS.load(ctx, [clustering])
    outcome = asyncio.run(INTENTS.work(ctx, clustering, loaded[clustering], llm))
    intents = outcome.records["intents"]
    assert sum(i.size for i in intents) == 34
    assert abs(sum(i.share for i in intents) - 1) < 1e-9
    assert {i.named_by for i in intents} == {"model", "keywords: label 12 words"}
    assert all(i.label and i.examples for i in intents)


LEAKS = [  # (text, the part that must go)
    ("DB_PASSWORD=Hunter2024!", "Hunter2024!"),
    ("client_secret: abc123def456", "abc123def456"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("whsec_abcdefghijklmnopqrstuvwxyz12", "whsec_"),
    ("https://hooks.slack.com/services/T000/B000/XXXX", "T000/B000"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow (cut off)", "MIIEow"),
    ("SSN 123-45-6789", "123-45-6789"),
    ("IBAN GB82 WEST 1234 5698 7654 32", "GB82"),
    ("jürgen.müller@web.de", "müller"),
    ("jane%40example.com", "jane"),
    ("電話番号は+81-90-1234-5678です", "1234"),
    ("my number is 415 555 0132", "555"),
]
KEPT = [
    "balance 98765.43 USD",
    "refund 4471902.50",
    "order 4471902, ORD-4471902, #4471902, INV-2024-000123",
    "DHL 1234567890 at 1732924800",
    "id 1000000000009",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "400 tokens per second; tokens: 5",
]


def test_secret_shapes_found_and_ids_kept():
    scrubber = Scrubber()
    assert [text for text, secret in LEAKS if secret in scrubber.scrub(text)] == []
    assert [text for text in KEPT if scrubber.scrub(text) != text] == []


def test_numbers_in_tool_arguments_are_read_with_their_key():
    counts: Counter = Counter()
    arguments = {"phone": 4155550132, "card": 4111111111111111, "amount": 39.9, "id": 4471902}
    assert Scrubber().scrub_value(arguments, counts) == {
        "phone": "[PHONE]",
        "card": "[CARD]",
        "amount": 39.9,
        "id": 4471902,
    }


def test_structure_is_not_scrubbed_but_origin_and_model_are(tmp_path):
    line = {
        "model": "gpt user=ana@example.com",
        "messages": [
            {"role": "user", "content": "user42 here"},
            {"role": "assistant", "content": "hello user42"},
        ],
    }
    path = tmp_path / "ana@example.com.jsonl"
    path.write_text(json.dumps(line) + "\n")
    config = TracesConfig(scrub_patterns={"handle": r"user[0-9]*"})
    lake = Lake(tmp_path / "home")
    assert ingest_traces([str(path)], lake, config, "r", print) == {"done:ingested": 1}
    [trace] = lake.records("traces")
    assert [m.role for m in trace.messages] == ["user", "assistant"]
    assert trace.answer == "hello [HANDLE]"
    assert "ana@example.com" not in trace.origin + trace.model


def test_records_that_break_a_reader_are_recorded_not_raised(tmp_path):
    span = {"traceId": "t", "spanId": "s", "name": "chat", "context": None}
    lines = [
        {
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [{"function": "lookup"}]},
            ]
        },
        {"resourceSpans": [{"scopeSpans": [{"spans": [span | {"attributes": [{"v": 1}]}]}]}]},
        {"resourceSpans": "not a list"},
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    found, bad = read_all(path)
    assert not found and len(bad) == 3
    assert {b.reason for b in bad} <= {"malformed_record", "bad_tool_call", "no_genai_spans"}


def exchange(question: str) -> str:
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": "Done."}]
    return json.dumps({"messages": messages})


def test_hostile_lines_are_refused_one_by_one_and_the_rest_is_read(tmp_path):
    path = tmp_path / "mixed.jsonl"
    user = b'{"messages": [{"role": "user", "content": '
    lines = [
        exchange("first").encode(),
        exchange("x" * 500_000).encode(),  # over the limit below
        user + b'"caf\xe9"}]}',  # Latin-1, not UTF-8
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the JSON parser recurses
        user + b"[" * 70 + b'"x"' + b"]" * 70 + b"}]}",  # parses, but too deep to keep
        exchange("last").encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    items = list(read_file(path, max_record_bytes=400_000))
    found = [i for i in items if isinstance(i, Conversation)]
    assert [c.messages[0]["content"] for c in found] == ["first", "last"]
    reasons = {int(i.origin.rsplit(":", 1)[1]): i.reason for i in items if isinstance(i, Malformed)}
    assert reasons == {2: "too_large", 3: "undecodable", 4: "invalid_json", 5: "too_deep"}


def test_a_gigantic_line_is_skipped_without_being_held(tmp_path):
    import tracemalloc

    path = tmp_path / "huge.jsonl"
    with path.open("wb") as out:
        out.write(b'{"messages": [{"role": "user", "content": "')
        for _ in range(64):
            out.write(b"y" * (1 << 20))
        out.write(b'"}]}\n' + exchange("after the huge line").encode() + b"\n")
    tracemalloc.start()
    items = list(read_file(path, max_record_bytes=1 << 20))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [i.reason for i in items if isinstance(i, Malformed)] == ["too_large"]
    assert [c.messages[0]["content"] for c in items if isinstance(c, Conversation)] == [
        "after the huge line"
    ]
    assert peak < 8 << 20  # a 64 MiB line read with at most a few MiB held


def test_files_that_are_no_trace_files_are_refused_whole(tmp_path):
    import os

    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "image.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256)))
    os.mkfifo(folder / "pipe.jsonl")
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")
    (folder / "big.json").write_text(exchange("x" * 5_000))
    (folder / "ok.jsonl").write_text(exchange("fine") + "\n")
    lake = Lake(tmp_path / "home")
    cfg = TracesConfig(max_record_bytes=4_000)
    counts = ingest_traces([str(folder)], lake, cfg, "run-1", lambda message: None)
    assert counts == Counter(
        {
            "done:ingested": 1,
            "rejected:binary": 1,
            "rejected:not_a_regular_file": 1,
            "rejected:symlink_loop": 1,
            "rejected:too_large": 1,
        }
    )
    rejected = lake.rows("SELECT item_id, reason, detail FROM status WHERE status = 'rejected'")
    assert {Path(r["item_id"]).name: r["reason"] for r in rejected} == {
        "image.jsonl": "binary",
        "pipe.jsonl": "not_a_regular_file",
        "loop.jsonl": "symlink_loop",
        "big.json": "too_large",
    }
    assert all(r["detail"] for r in rejected)


def test_one_api_key_rollout_splits_into_its_conversations():
    def call(n, messages, answer):
        return {
            "call_id": f"c{n}",
            "rollout_id": "key:abc",
            "started_at": f"2026-11-30T10:0{n}:00",
            "model": "m",
            "messages": json.dumps(messages),
            "params": "[]",
            "response": json.dumps([{"message": {"role": "assistant", "content": answer}}]),
            "status": 200,
            "retry": "x",
        }

    first = [{"role": "user", "content": "Track DC1"}]
    rows = [
        call(0, first, "calling"),
        call(1, [{"role": "user", "content": "Hours?"}], "9 to 5"),
        call(
            2,
            [
                *first,
                {"role": "assistant", "content": "calling"},
                {"role": "user", "content": "and?"},
            ],
            "arrives Monday",
        ),
    ]
    from data.traces import proxy_rollouts

    conversations = list(proxy_rollouts(rows, "p"))
    assert [c.messages[-1]["content"] for c in conversations] == ["arrives Monday", "9 to 5"]
    assert [c.origin for c in conversations] == ["p#key:abc", "p#key:abc#1"]


def test_a_new_scrub_pattern_replaces_the_stored_trace_on_disk(tmp_path):
    line = {
        "messages": [
            {"role": "user", "content": "My employee id is EMP-44123, where is my payslip?"},
            {"role": "assistant", "content": "Payslips are in the HR portal under Documents."},
        ]
    }
    path = tmp_path / "hr.jsonl"
    path.write_text(json.dumps(line) + "\n")
    lake = Lake(tmp_path / "home")
    ingest_traces([str(path)], lake, TracesConfig(), "r1", print)
    config = TracesConfig(scrub_patterns={"employee_id": r"\bEMP-\d{5}\b"})
    counts = ingest_traces([str(path)], lake, config, "r2", print)
    assert counts == {"done:ingested": 1, "superseded": 1}
    [trace] = lake.records("traces")
    assert "[EMPLOYEE_ID]" in trace.request
    on_disk = [pq.read_table(p).to_pylist() for p in lake.shards("traces")]
    assert "EMP-44123" not in json.dumps(on_disk, default=str)
    assert ingest_traces([str(path)], lake, config, "r3", print) == {"done:ingested": 1}
