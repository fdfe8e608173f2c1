"""Held-out scrubbing: kinds of secrets and personal data that the sample traces do not plant,
ordinary text left as it is, and every table that holds trace text (traces, status,
proxy_calls, LLM usage) and the LLM cache free of what was planted."""

from __future__ import annotations

import json
import math
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import phonenumbers
import pyarrow.parquet as pq

from bench.scrub_lines import PROSE, WORDS, line, word_line
from bench.scrub_lines import seconds as timed
from data.export import export_taskset, formats, project
from data.lake import TABLES, Lake, ProxyCall, utcnow
from data.scrub import PHONE_WINDOW, Scrubber, phone_spans
from data.traces import ingest_traces
from families import export_kinds
from harnesses.proxy_records import CallRecorder
from judges.verifier_types import package_graders
from sources import groupings
from tests.conftest import endpoints_for, make_context, run_llm_stages
from tests.exported_files import file_text

SAMPLE_DOCS = Path(__file__).resolve().parent.parent / "data" / "samples" / "docs"

AZURE = "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG9mcmVkcGx1Z2g0Mg=="
HEX_KEY = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
TWILIO = "SK0123456789abcdef0123456789abcdef"
HELD_OUT = [  # (text, the planted value that must not survive)
    (
        "DefaultEndpointsProtocol=https;AccountName=acme;"
        f"AccountKey={AZURE};EndpointSuffix=core.windows.net",
        AZURE,
    ),
    ("AccountName=ops;AccountKey=q8Lw3N0vHf2xYbR7tPz1KsJ5mGd9Ce4Ua6Vn8Ho0Ti2X+/Wl7Qy==", "q8Lw3N"),
    (f"key={HEX_KEY}", HEX_KEY),
    ("signing key: 'E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855'", "E3B0C4"),
    (f"twilio {TWILIO} for the SMS", TWILIO),
    ("api key SKA1B2C3D4E5F60718293A4B5C6D7E8F90.", "SKA1B2C3"),
    ("my password: hunter", "hunter"),
    ("password=correcthorsebattery", "correcthorsebattery"),
    ("pwd: letmein", "letmein"),
    ('{"password": "swordfish"}', "swordfish"),
    ("Password: Opensesame. Thanks!", "Opensesame"),
    ("db_passwd=trustno", "trustno"),
    ("my phone +44 20 7946 0000", "7946 0000"),
    ("+1 555 0100 1234", "0100 1234"),
    ("call me at 555-0199", "555-0199"),
    ("text me on (555) 010-0000 after six", "010-0000"),
    ("reach me back at 555 0142.", "555 0142"),
]
KEPT = [
    "def compute_total(order_items, tax_rate=0.2): return sum(i.price for i in order_items)",
    "see https://example.com/docs/v2/install?page=3#keys and https://github.com/acme/kettle/pull/44",
    "released v3.12.1002 on 2024-01-05T10:30:00Z (build 20240105.3), 1.2.3 -> 1.2.4",
    "price $1,299.99, was 1.049,00 EUR; 3 x 12.50 = 37.50; 45% off until 31.12.2024",
    "meeting 10:30-11:45 in room 4-201; tracking 1Z999AA10123456784; port 5432",
    "primary key: order_items_v2; key=value; sort key: created_at; monkey: George",
    "never share your password: change it if you think someone saw it",
    "the password field is required; reset your password in settings",
    "Date: Mon Jan 5 10:00:00 2024 +0000, commit 3f2a9c1d, +5 points, 2+2=4",
    "invoice 555-0199 and order 447-1902 are paid",
]


def test_held_out_secrets_and_phone_numbers_do_not_survive():
    scrubber = Scrubber()
    assert [text for text, secret in HELD_OUT if secret in scrubber.scrub(text)] == []
    scrubbed = [scrubber.scrub(text) for text, _ in HELD_OUT]
    assert [scrubber.scrub(text) for text in scrubbed] == scrubbed  # placeholders stay


def test_ordinary_text_is_kept():
    scrubber = Scrubber()
    assert [text for text in KEPT if scrubber.scrub(text) != text] == []


def test_the_sample_documents_lose_no_line():
    """The bundled documents plant nothing: scrubbing changes none of their lines."""
    scrubber = Scrubber()
    lines = [ln for p in sorted(SAMPLE_DOCS.iterdir()) for ln in p.read_text().splitlines()]
    assert len(lines) > 300
    assert [ln for ln in lines if scrubber.scrub(ln) != ln] == []


def test_planted_values_reach_no_table_nor_the_llm_cache(tmp_path, oracle_server):
    """Secrets planted in a trace file (messages, tool arguments and results, the tools'
    descriptions and parameter schemas, the model name, a malformed line's detail) and in a
    proxied call: after ingestion, every LLM stage and the recorder's flush, no text column of
    any lake table and no cached LLM request or response holds one; nor does any file of the
    taskset version exported with every projection (each projection's folder, the verifiers
    package and Harbor's tasks included, read recursively: parquet cells down to their nested
    values and the JSON held in their strings)."""
    planted = [secret for _, secret in HELD_OUT]
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "chat.jsonl").write_text("\n".join(json.dumps(line) for line in chat_lines()))
    ctx = make_context(tmp_path / "home")
    counts = ingest_traces([str(traces)], ctx.lake, ctx.config.traces, "r1", lambda m: None)
    assert counts["done:ingested"] == 2
    assert counts["rejected:bad_message"] == 1
    run_llm_stages(ctx, endpoints_for(oracle_server))
    recorder = CallRecorder(ctx.lake, "r1", scrubber=Scrubber())
    recorder.add(proxy_call(HELD_OUT))
    recorder.flush()

    stored = {table: lake_text(ctx.lake, table) for table in TABLES}
    assert stored["traces"] and stored["status"] and stored["proxy_calls"]
    assert "[SECRET]" in stored["traces"] and "[PHONE]" in stored["proxy_calls"]
    cached = [p.read_text() for p in (ctx.config.home / "cache").rglob("*.json")]
    assert cached  # the stages asked the model about the traces
    stored["llm cache"] = "".join(cached)
    exported, described = exported_everywhere(ctx, tmp_path / "tasksets")
    stored |= {f"export {name}": text for name, text in exported.items()}
    found = {where: [p for p in planted if p in text] for where, text in stored.items()}
    assert {where: values for where, values in found.items() if values} == {}
    # the exported tool definition is the scrubbed one, not one dropped along the way
    assert all("[SECRET]" in d and "[API_KEY]" in d for d in described), described


def exported_everywhere(ctx, base: Path) -> tuple[dict[str, str], list[str]]:
    """The lake's tasks exported with every registered projection: each file of the version
    (every folder down) as text, and the tool descriptions its tool-replay tasks carry.
    Checks that the scan has something to read: files in every projection's folder, and a
    tool-replay task exported with its tool definitions."""
    version = export_taskset(
        ctx.lake, "traces", base, kinds=export_kinds(), groupings=groupings()
    ).path
    folders = {
        fmt: project(version, fmt, ctx.lake, graders=package_graders()).path for fmt in formats()
    }
    files = sorted(p for p in version.rglob("*") if p.is_file())
    texts = {str(p.relative_to(version)): "\n".join(texts_of(p)) for p in files}
    assert all(any(folder in p.parents for p in files) for folder in folders.values()), folders
    replays = [t for t in ctx.lake.records("tasks") if t.kind == "tool_replay"]
    assert replays, "no tool-replay task: the tool definitions never reach the export"
    tables = [p for p in files if p.suffix == ".parquet" and version / "data" in p.parents]
    rows = [row for p in tables for row in pq.read_table(p).to_pylist()]
    described = [
        tool["description"]
        for row in rows
        if row["kind"] == "tool_replay"
        for tool in json.loads(row["environment"])["tools"]
    ]
    assert described, "no tool definition was exported"
    return texts, described


def texts_of(path: Path) -> Iterator[str]:
    """A file as text (`tests.exported_files.file_text`), and for a parquet or JSON file every
    string it holds, nested values and JSON written inside strings decoded: an escape in
    the file's text cannot hide a value."""
    yield file_text(path)
    if path.suffix == ".parquet":
        yield from strings_in(pq.read_table(path).to_pylist())
    elif path.suffix == ".json":
        yield from strings_in(json.loads(path.read_text()))


def strings_in(value: Any) -> Iterator[str]:
    """Every string in `value` (dictionary keys too), down through lists and dictionaries and
    into JSON held in a string."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield str(key)
            yield from strings_in(inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from strings_in(inner)
    elif isinstance(value, bytes):
        yield value.decode("utf-8", errors="replace")
    elif isinstance(value, str):
        yield value
        try:
            inner = json.loads(value) if value[:1] in ("{", "[", '"') else None
        except ValueError:
            inner = None  # not JSON
        yield from strings_in(inner)
    elif value is not None:
        yield str(value)


def chat_lines() -> list[dict]:
    """Two exchanges holding every held-out value (the first one's tool definition, its
    description and parameter schema, holds some too; its final reply is long enough for the
    oracle to rate it good, so it becomes a tool-replay task carrying that definition), and a
    line whose role quotes a password."""
    texts = [text for text, _ in HELD_OUT]
    parameters = {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "description": f"the order's id; {texts[5]}"},
            "contact": {"type": "string", "default": texts[12]},
        },
    }
    lookup = {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": f"Find an order by its id. {texts[3]} {texts[4]}",
            "parameters": parameters,
        },
    }
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": json.dumps({"note": texts[2]})},
    }
    first = [
        {"role": "user", "content": f"Where is order ORD-1? {' '.join(texts[:9])}"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"ok": texts[0]})},
        {
            "role": "assistant",
            "content": f"It ships Friday from the Leeds warehouse; a tracking email follows. "
            f"{texts[6]}",
        },
    ]
    second = [
        {"role": "user", "content": f"Can I change my delivery address? {' '.join(texts[9:])}"},
        {"role": "assistant", "content": "Yes, from your order page until it ships."},
    ]
    broken = [{"role": "password=correcthorsebattery", "content": "hi"}]
    return [
        {"messages": first, "tools": [lookup], "model": f"m {TWILIO}"},
        {"messages": second, "model": "m"},
        {"messages": broken, "model": "m"},
    ]


def proxy_call(held_out: list[tuple[str, str]]) -> ProxyCall:
    texts = [text for text, _ in held_out]
    messages = [{"role": "user", "content": " ".join(texts)}]
    choices = [{"message": {"role": "assistant", "content": texts[-1]}}]
    return ProxyCall(
        call_id="p1",
        rollout_id=TWILIO,
        started_at=utcnow(),
        model="m",
        messages=json.dumps(messages),
        params=json.dumps({"tools": [{"description": texts[3]}]}),
        response=json.dumps(choices),
        finish_reason="stop",
        prompt_tokens=1,
        completion_tokens=1,
        latency_s=0.1,
        status=502,
        error=texts[7],
        stream=False,
        retry=0,
    )


def lake_text(lake: Lake, table: str) -> str:
    """Every row of `table` as JSON text."""
    return json.dumps(lake.rows(f"SELECT * FROM {table}"), default=str)


def test_phone_numbers_in_a_long_run_are_found_across_window_edges():
    """libphonenumber reads windows of the runs where numbers can be written: every number it
    finds reading the whole text, at any offset from a window's edge, is found in the windows
    too (they may find more: a window starts without the digits before it)."""
    numbers = "415-555-0132 / 212 555 0187 / 4155550199 "  # inside the run: no "+" or "("
    found = 0
    for offset in range(0, 2 * PHONE_WINDOW, 7):
        text = "rows " + ("7 " * PHONE_WINDOW)[:offset] + numbers + "7 " * 100
        windowed = phone_spans(text, "US")
        for match in phonenumbers.PhoneNumberMatcher(
            text, "US", leniency=phonenumbers.Leniency.VALID
        ):
            number = match.raw_string.strip()
            start = match.start + match.raw_string.index(number)
            found += 1
            assert any(a <= start and start + len(number) <= b for a, b in windowed), offset
    assert found


def test_a_time_after_a_date_is_not_a_phone_number():
    for text in ('"at": "2026-11-24 10:42"', "delivered 2026-11-28 14:07:42 to the door"):
        assert Scrubber().scrub(text) == text


def test_scrubbing_grows_linearly_with_the_line_even_on_words_built_to_backtrack():
    """Any line of n bytes, prose or one of the bench's adversarial words (each once made a
    pattern backtrack quadratically), is scrubbed within 30 times the CPU that n bytes of
    prose take at the rate of 100 kB of it: linear, not quadratic. Each line is scrubbed in a
    child held to that CPU, so a quadratic scrubber fails in seconds rather than running for
    hours; a ratio measured in one run, so the machine's speed and load cancel out."""
    scrubber = Scrubber()
    per_byte = min(timed(scrubber, line(PROSE, 100_000)) for _ in range(2)) / 100_000
    for name in ("prose", *WORDS):
        for size in (100_000, 1_000_000):
            text = line(PROSE, size) if name == "prose" else word_line(name, size)
            budget = 30 * per_byte * size
            assert scrubbed_within(scrubber, text, budget), (
                f"{name!r}: {size:,} bytes took over {budget:.2f} CPU s"
            )


def scrubbed_within(scrubber: Scrubber, text: str, cpu_s: float) -> bool:
    """Whether a forked child scrubs `text` within `cpu_s` of CPU (its RLIMIT_CPU, in whole
    seconds: the limit is rounded up, and a child over it is killed by SIGXCPU)."""
    child = os.fork()
    if child == 0:
        limit = math.ceil(cpu_s)
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
        scrubber.scrub(text)
        os._exit(0 if time.process_time() <= cpu_s else 1)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) == 0
