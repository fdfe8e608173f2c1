"""Trace ingestion: read, scrub, embed and store production exchanges.

Scrubbing comes first: a conversation is scrubbed (`data.scrub`) before its id is computed, its
request embedded or anything written, so the lake never holds the original text of a traced
exchange. Every input is accounted for in the `status` table under the stage `trace_ingest`:
a malformed line (or file, or rollout) is `rejected` with its reason and where it was; an
exchange is `done` with its trace id, or `rejected` as a duplicate of one already stored.
Re-ingesting the same files writes nothing new. When an input yields a different trace than
before (a scrub pattern was added, or the file changed), the new trace replaces the old one:
the old trace is deleted from the lake's shards, and tasks made from it leave the export.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from data.lake import Lake, Status, ToolCall, ToolSpec, Trace, TraceMessage, content_id, utcnow
from data.llm import embed
from data.scrub import Scrubber, nonzero
from data.traces.conversation import Conversation, Malformed
from data.traces.formats import read_unit, units
from data.traces.settings import TracesConfig

STAGE = "trace_ingest"
Progress = Callable[[str], None]


def scrubber_for(cfg: TracesConfig) -> Scrubber:
    return Scrubber(custom=cfg.scrub_patterns, phone_regions=cfg.phone_regions)


def scrubbed_trace(conversation: Conversation, scrubber: Scrubber) -> Trace:
    """The conversation as a trace with everything free-form scrubbed (message text, tool
    arguments and results, tool descriptions and schemas, where it came from, the model name);
    roles, tool names and call ids are structure and stay. Its embedding is left empty."""
    counts: Counter = Counter()
    messages = [
        TraceMessage(
            role=m["role"],
            content=scrubber.scrub(m["content"], counts),
            tool_calls=[
                ToolCall(
                    name=c["name"],
                    arguments=scrubber.scrub_value(c["arguments"], counts),
                    call_id=c["call_id"],
                )
                for c in m["tool_calls"]
            ],
            tool_call_id=m["tool_call_id"],
        )
        for m in conversation.messages
    ]
    tools = [
        ToolSpec(
            name=t["name"],
            description=scrubber.scrub(t["description"], counts),
            parameters=scrubber.scrub_value(t["parameters"], counts),
        )
        for t in conversation.tools
    ]
    request = next(m.content for m in reversed(messages) if m.role == "user" and m.content.strip())
    return Trace(
        trace_id=content_id("trace", messages, tools),
        origin=scrubber.scrub(conversation.origin, counts),
        format=conversation.format,  # type: ignore[arg-type]
        model=scrubber.scrub(conversation.model, counts),
        messages=messages,
        tools=tools,
        request=request,
        answer=messages[-1].content,
        scrubbed=nonzero(counts),
        embedding=[],
        ingested_at=utcnow(),
        occurred_at=conversation.occurred_at,
    )


def ingest_traces(
    paths: list[str], lake: Lake, cfg: TracesConfig, run_id: str, progress: Progress
) -> Counter:
    """Ingest the trace files under `paths`; returns counts of outcomes by reason."""
    found = units(paths)
    progress(f"ingest traces: {len(found)} files or shard folders")
    scrubber = scrubber_for(cfg)
    known = {r["trace_id"]: r["origin"] for r in lake.rows("SELECT trace_id, origin FROM traces")}
    recorded = {
        r["item_id"]: (r["status"], r["reason"], r["detail"])
        for r in lake.rows(
            "SELECT item_id, status, reason, detail FROM status WHERE stage = ?", [STAGE]
        )
    }
    counts: Counter = Counter()
    for name, files in found:
        statuses: list[Status] = []
        fresh: dict[str, Trace] = {}
        for item in _items(name, files, cfg.max_record_bytes):
            if isinstance(item, Malformed):
                origin = scrubber.scrub(item.origin)
                state, reason, detail = "rejected", item.reason, scrubber.scrub(item.detail)
            else:
                trace = scrubbed_trace(item, scrubber)
                origin = trace.origin
                state, reason, detail = "done", "ingested", trace.trace_id
                if trace.trace_id not in known and trace.trace_id not in fresh:
                    fresh[trace.trace_id] = trace
                elif known.get(trace.trace_id) != origin:  # stored from another input
                    state, reason = "rejected", "duplicate_trace"
            statuses.append(Status.now(STAGE, origin, state, reason, detail, run_id))
            counts[f"{state}:{reason}"] += 1
        vectors = embed([t.request for t in fresh.values()])
        traces = [
            t.model_copy(update={"embedding": [float(x) for x in v]})
            for t, v in zip(fresh.values(), vectors, strict=True)
        ]
        lake.write("traces", traces, run_id)
        known.update({t.trace_id: t.origin for t in traces})
        changed = [s for s in statuses if recorded.get(s.item_id) != (s.status, s.reason, s.detail)]
        lake.write("status", changed, run_id)
        scrubbed = sum(sum(t.scrubbed.values()) for t in traces)
        progress(f"ingest traces: {name}: {len(traces)} new, {scrubbed} values scrubbed")
    purged = purge_superseded(lake, run_id)
    if purged:
        counts["superseded"] = purged
        progress(f"ingest traces: {purged} traces replaced by their rescrubbed or changed input")
    return counts


def purge_superseded(lake: Lake, run_id: str) -> int:
    """Delete the traces whose input now yields another trace (its latest ingest status names
    a different trace id); returns how many went."""
    gone = lake.rows(
        "SELECT t.trace_id FROM traces t JOIN status s ON s.stage = ? AND s.item_id = t.origin"
        " AND s.status = 'done' AND s.detail <> t.trace_id",
        [STAGE],
    )
    if not gone:
        return 0
    ids = [r["trace_id"] for r in gone]
    lake.compact("traces", lake.records("traces", "NOT list_contains(?, trace_id)", [ids]), run_id)
    return len(ids)


def _items(
    name: str, files: list[Path], max_record_bytes: int
) -> Iterator[Conversation | Malformed]:
    """The unit's items; a reader failing in a way no check foresaw ends the unit with a
    `Malformed` naming the error, and the run goes on."""
    try:
        yield from read_unit(files, max_record_bytes)
    except Exception as exc:  # noqa: BLE001 - recorded as the unit's outcome, visible in stats
        yield Malformed(name, "reader_error", f"{type(exc).__name__}: {exc}")
