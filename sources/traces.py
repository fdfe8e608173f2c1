"""Production traces: OpenAI-style JSONL, OpenTelemetry GenAI spans and the proxy's records,
read, scrubbed of secrets and personal data, embedded and stored in the lake's `traces` table
(`data.traces.ingest`); the trace families cluster their requests and make tasks of them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from data.config import FoundryConfig
from data.export import Grouping, Row
from data.lake import Lake
from data.traces import discover, ingest_traces
from families.stage import StageContext
from sources.base import Source

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "samples" / "traces"


def ingest_trace_files(paths: list[str], ctx: StageContext) -> Counter:
    """Read, scrub, embed and store the traces under `paths`; record every input's outcome."""
    return ingest_traces(paths, ctx.lake, ctx.config.traces, ctx.run_id, ctx.progress)


def _read(items: list[str], ctx: StageContext, options: Mapping[str, Any]) -> dict[str, Any]:
    return dict(ingest_trace_files(items, ctx))


def estimate_traces(items: list[str], config: FoundryConfig, lake: Lake) -> int:
    """The traces in the files under `items` the lake has read nothing from: a JSONL file's
    non-empty lines, a JSON file's one, a parquet shard's rows (the proxy's calls; several make
    one trace, so this is at most)."""
    read = {
        r["file"]
        for r in lake.rows(
            "SELECT DISTINCT regexp_extract(item_id, '^(.*?)(:[0-9]+)?(#.*)?$', 1) AS file"
            " FROM status WHERE stage = 'trace_ingest'"
        )
    }
    found = 0
    for path in discover(items):
        if str(path) in read or str(path.parent) in read:
            continue
        try:
            if path.suffix == ".parquet":
                found += pq.ParquetFile(path).metadata.num_rows
            elif path.suffix == ".json":
                found += 1
            else:
                with path.open("rb") as lines:
                    found += sum(1 for line in lines if line.strip())
        except (OSError, ValueError):
            continue
    return found


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
    unit_stage="trace_tasks",
    estimate=estimate_traces,
    unit_cap=lambda config: config.traces.max_traces,
)
