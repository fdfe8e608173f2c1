"""Documents: files (or folders of them) read, normalised, chunked and deduplicated into the
lake's `sources` and `chunks` tables (`data.documents.ingest`); the task families that start from a
passage (document questions, reports) generate from the chunks."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from data.config import FoundryConfig
from data.documents import discover, ingest_documents
from data.export import Grouping, Row
from data.lake import Lake
from families.stage import StageContext
from sources.base import Source

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "samples" / "docs"


def ingest_docs(paths: list[str], ctx: StageContext) -> Counter:
    """Read, normalise, chunk and deduplicate documents; record every file's outcome."""
    return ingest_documents(paths, ctx.lake, ctx.config.ingest, ctx.run_id, ctx.progress)


def _read(items: list[str], ctx: StageContext, options: Mapping[str, Any]) -> dict[str, Any]:
    return dict(ingest_docs(items, ctx))


# For estimates only (`foundry run --plan` states its range): the characters of text per byte
# of a packed binary format (PDF, Office, e-book), and a chunk's length as a share of
# `ingest.chunk_chars` where the lake has no chunks to measure it on (chunks end at section
# and paragraph breaks: the bundled samples' average 0.66).
BINARY_FORMATS = frozenset({".pdf", ".docx", ".pptx", ".xlsx", ".epub"})
BINARY_TEXT_SHARE = 0.1
CHUNK_FILL = 0.65


def estimate_chunks(items: list[str], config: FoundryConfig, lake: Lake) -> int:
    """The chunks the documents under `items` add to the lake, from their sizes: files it has
    ingested, and copies of a file already counted, add none; a text file counts its bytes, a
    binary format's at `BINARY_TEXT_SHARE`, over the lake's bytes per chunk (else `CHUNK_FILL`
    of the chunk size), at least one chunk a file."""
    ingested = lake.finished_items("ingest")
    per_chunk = _bytes_per_chunk(lake) or config.ingest.chunk_chars * CHUNK_FILL
    counted: set[str] = set()
    chunks = 0.0
    for path in discover(items):
        if str(path) in ingested:
            continue
        try:
            content = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            continue
        if content in counted:
            continue
        counted.add(content)
        size = path.stat().st_size
        text = size * BINARY_TEXT_SHARE if path.suffix.lower() in BINARY_FORMATS else size
        chunks += max(1.0, text / per_chunk) if size else 0.0
    return math.ceil(chunks)


def _bytes_per_chunk(lake: Lake, sample: int = 1000) -> float | None:
    """Bytes of text-format file per chunk, over up to `sample` of the lake's documents whose
    files are still there (None: none are)."""
    rows = lake.rows(
        "SELECT s.path, count(c.chunk_id) AS chunks FROM sources s"
        " JOIN chunks c USING (source_id) GROUP BY s.path ORDER BY s.path LIMIT ?",
        [sample],
    )
    sizes, chunks = 0, 0
    for row in rows:
        path = Path(row["path"])
        if path.suffix.lower() in BINARY_FORMATS or not path.is_file():
            continue
        sizes += path.stat().st_size
        chunks += row["chunks"]
    return sizes / chunks if chunks else None


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
    unit_stage="generate",
    estimate=estimate_chunks,
    unit_cap=lambda config: config.generate.max_chunks,
    bare=True,
)
