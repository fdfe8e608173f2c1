"""Documents: files (or folders of them) read, normalised, chunked and deduplicated into the
lake's `sources` and `chunks` tables (`data.ingest`); the task families that start from a
passage (document questions, reports) generate from the chunks."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from data.ingest import ingest_documents
from data.splits import Grouping, Row
from families.stage import StageContext
from sources.base import Source

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "samples" / "docs"


def ingest_docs(paths: list[str], ctx: StageContext) -> Counter:
    """Read, normalise, chunk and deduplicate documents; record every file's outcome."""
    return ingest_documents(paths, ctx.lake, ctx.config.ingest, ctx.run_id, ctx.progress)


def _read(items: list[str], ctx: StageContext, options: Mapping[str, Any]) -> dict[str, Any]:
    return dict(ingest_docs(items, ctx))


def document_keys(row: Row) -> list[str]:
    """Every source document a task's passages come from."""
    spans = json.loads(row.get("source") or "[]")
    return list({f"document:{span['source_id']}" for span in spans if span.get("source_id")})


SOURCE = Source(
    name="docs",
    help="documents (.md .txt .html .pdf .docx .pptx .xlsx .csv .epub .ipynb .rst .adoc)"
    " or folders",
    items="document files or folders",
    read=_read,
    tables=("sources",),
    grouping=Grouping(
        "documents", "document: every source document a question draws on", document_keys
    ),
    sample=lambda ctx: [str(SAMPLE)],
    bare=True,
)
