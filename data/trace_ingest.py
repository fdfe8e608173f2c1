"""Trace ingestion: read, scrub, embed and store production exchanges.

Scrubbing comes first: a conversation is scrubbed (`data.scrub`) before its id is computed, its
request embedded or anything written, so the lake never holds the original text of a traced
exchange. Every input is accounted for in the `status` table under the stage `trace_ingest`:
a malformed line (or file, or rollout) is `rejected` with its reason and where it was; an
exchange is `done` with its trace id, or `rejected` as a duplicate of one already stored.
Re-ingesting the same files writes nothing new.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from data.config import TracesConfig
from data.embeddings import embed
from data.lake import Lake
from data.records import Status, ToolSpec, Trace, TraceMessage, content_id, utcnow
from data.scrub import Scrubber, nonzero
from data.trace_formats import Conversation, Malformed, read_unit, units

STAGE = "trace_ingest"
Progress = Callable[[str], None]


def scrubber_for(cfg: TracesConfig) -> Scrubber:
    return Scrubber(custom=cfg.scrub_patterns, phone_region=cfg.phone_region)


def scrubbed_trace(conversation: Conversation, scrubber: Scrubber) -> Trace:
    """The conversation as a trace, every string scrubbed; its embedding is left empty."""
    counts: Counter = Counter()
    messages = [
        TraceMessage.model_validate(scrubber.scrub_value(m, counts)) for m in conversation.messages
    ]
    tools = [ToolSpec.model_validate(scrubber.scrub_value(t, counts)) for t in conversation.tools]
    request = next(m.content for m in reversed(messages) if m.role == "user" and m.content.strip())
    return Trace(
        trace_id=content_id("trace", messages, tools),
        origin=conversation.origin,
        format=conversation.format,  # type: ignore[arg-type]
        model=conversation.model,
        messages=messages,
        tools=tools,
        request=request,
        answer=messages[-1].content,
        scrubbed=nonzero(counts),
        embedding=[],
        ingested_at=utcnow(),
    )


def ingest_traces(
    paths: list[str], lake: Lake, cfg: TracesConfig, run_id: str, progress: Progress
) -> Counter:
    """Ingest the trace files under `paths`; returns counts of outcomes by reason."""
    found = units(paths)
    progress(f"ingest traces: {len(found)} files or shard folders")
    scrubber = scrubber_for(cfg)
    known = {r["trace_id"] for r in lake.rows("SELECT trace_id FROM traces")}
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
        for item in read_unit(files):
            if isinstance(item, Malformed):
                state, reason, detail = "rejected", item.reason, item.detail
            else:
                trace = scrubbed_trace(item, scrubber)
                state, reason, detail = "done", "ingested", trace.trace_id
                if trace.trace_id not in known and trace.trace_id not in fresh:
                    fresh[trace.trace_id] = trace
                elif recorded.get(item.origin) != (state, reason, detail):
                    # stored before, and not from this very input by an earlier run
                    state, reason = "rejected", "duplicate_trace"
            statuses.append(Status.now(STAGE, item.origin, state, reason, detail, run_id))
            counts[f"{state}:{reason}"] += 1
        vectors = embed([t.request for t in fresh.values()])
        traces = [
            t.model_copy(update={"embedding": [float(x) for x in v]})
            for t, v in zip(fresh.values(), vectors, strict=True)
        ]
        lake.write("traces", traces, run_id)
        known.update(fresh)
        changed = [s for s in statuses if recorded.get(s.item_id) != (s.status, s.reason, s.detail)]
        lake.write("status", changed, run_id)
        scrubbed = sum(sum(t.scrubbed.values()) for t in traces)
        progress(f"ingest traces: {name}: {len(traces)} new, {scrubbed} values scrubbed")
    return counts
