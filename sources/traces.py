"""Production traces: OpenAI-style JSONL, OpenTelemetry GenAI spans and the proxy's records,
read, scrubbed of secrets and personal data, embedded and stored in the lake's `traces` table
(`data.trace_ingest`); the trace families cluster their requests and make tasks of them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from data.splits import Grouping, Row
from data.trace_ingest import ingest_traces
from families.stage import StageContext
from sources.base import Source

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "samples" / "traces"


def ingest_trace_files(paths: list[str], ctx: StageContext) -> Counter:
    """Read, scrub, embed and store the traces under `paths`; record every input's outcome."""
    return ingest_traces(paths, ctx.lake, ctx.config.traces, ctx.run_id, ctx.progress)


def _read(items: list[str], ctx: StageContext, options: Mapping[str, Any]) -> dict[str, Any]:
    return dict(ingest_trace_files(items, ctx))


def trace_keys(row: Row) -> list[str]:
    """A trace task's production trace and the intent cluster it is in."""
    if not row.get("trace_id"):
        return []
    return [f"trace:{row['trace_id']}", *([f"intent:{row['intent']}"] if row.get("intent") else [])]


SOURCE = Source(
    name="traces",
    help="production traces: OpenAI-style JSONL, OTel GenAI spans (JSON), proxy records",
    items="trace files or folders (.jsonl .json .parquet)",
    read=_read,
    tables=("traces",),
    grouping=Grouping(
        "traces",
        "trace and intent: the production trace and the intent cluster it is in",
        trace_keys,
    ),
    sample=lambda ctx: [str(SAMPLE)],
)
