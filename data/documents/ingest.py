"""Document ingestion: files into sources and deduplicated chunks in the lake."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from data.documents.chunking import Span, chunk_text
from data.documents.readers import Document, ReadLimits, discover, read_document
from data.documents.settings import IngestConfig
from data.lake import Chunk, ItemStatus, Lake, Source, Status, content_id, utcnow
from data.llm import as_matrix, embed, near_duplicates

Progress = Callable[[str], None]
FILES_PER_BATCH = 64


def ingest_documents(
    paths: list[str], lake: Lake, cfg: IngestConfig, run_id: str, progress: Progress
) -> Counter:
    """Read, normalise, chunk and deduplicate documents; record every file's outcome.

    Files already ingested unchanged are skipped; a file with the same content as one already
    in the lake is rejected as a duplicate; chunks identical to (or, by embedding cosine,
    near) an earlier chunk are rejected with the chunk they duplicate.
    """
    files = discover(paths)
    progress(f"ingest: {len(files)} files")
    limits = ReadLimits(cfg.max_file_bytes, cfg.convert_timeout_s, cfg.convert_memory_mb)

    def status(stage: str, item: str, state: ItemStatus, reason: str, detail: str = "") -> Status:
        return Status.now(stage, item, state, reason, detail, run_id)

    known_sources = {
        r["source_id"]: r["path"] for r in lake.rows("SELECT source_id, path FROM sources")
    }
    old = lake.rows("SELECT chunk_id, source_id, embedding FROM chunks ORDER BY chunk_id")
    known_chunks = {r["chunk_id"]: r["source_id"] for r in old}
    known_ids = [r["chunk_id"] for r in old]
    known_vectors = as_matrix([r["embedding"] for r in old])
    settled = lake.finished_items("chunk")
    recorded = {
        r["item_id"]: (r["status"], r["reason"], r["detail"])
        for r in lake.rows(
            "SELECT item_id, status, reason, detail FROM status WHERE stage = 'ingest'"
        )
    }
    counts: Counter = Counter()
    for group in _groups([str(f) for f in files]):
        sources, statuses, candidates = [], [], []
        for name in group:
            result = read_document(Path(name), limits)
            if not isinstance(result, Document):
                statuses.append(status("ingest", name, "rejected", result.reason, result.detail))
                counts[f"rejected:{result.reason}"] += 1
                continue
            source_id = content_id("doc", result.sha256)
            if source_id in known_sources and known_sources[source_id] != name:
                statuses.append(
                    status(
                        "ingest", name, "rejected", "duplicate_document", known_sources[source_id]
                    )
                )
                counts["rejected:duplicate_document"] += 1
                continue
            if source_id not in known_sources:
                sources.append(
                    Source(
                        source_id=source_id,
                        path=name,
                        name=files[Path(name)],
                        format=result.format,
                        sha256=result.sha256,
                        n_chars=len(result.text),
                        title=result.title,
                        text=result.text,
                        notes="; ".join(result.notes),
                        ingested_at=utcnow(),
                    )
                )
                known_sources[source_id] = name
            statuses.append(status("ingest", name, "done", "ingested", source_id))
            counts["ingested"] += 1
            counts.update(f"note:{note.split(':')[0]}" for note in result.notes)
            located = section_spans(result, cfg.chunk_chars, cfg.min_chunk_chars)
            candidates += [(source_id, i, span, where) for i, (span, where) in enumerate(located)]
        fresh = [c for c in candidates if f"{c[0]}#{c[1]}" not in settled]
        chunks, chunk_statuses, known_vectors = _dedup_chunks(
            fresh, known_chunks, known_ids, known_vectors, cfg.near_duplicate_threshold, status
        )
        counts.update(f"chunk:{s.status}:{s.reason}" for s in chunk_statuses)
        lake.write("sources", sources, run_id)
        lake.write("chunks", chunks, run_id)
        changed = [s for s in statuses if recorded.get(s.item_id) != (s.status, s.reason, s.detail)]
        lake.write("status", changed + chunk_statuses, run_id)
    return counts


def section_spans(document: Document, max_chars: int, min_chars: int) -> list[tuple[Span, str]]:
    """The document's chunks, each with the location of its section: a section is chunked on
    its own, so no chunk crosses a page, slide or sheet block; offsets index the whole text."""
    located = []
    for location, start, end in document.sections:
        for span in chunk_text(document.text[start:end], max_chars, min_chars):
            located.append((Span(span.text, span.start + start, span.end + start), location))
    return located


def _dedup_chunks(candidates, known_chunks, known_ids, known_vectors, threshold, status):
    """Drop exact (same text) and near (cosine >= threshold) duplicate chunks, with reasons.

    `known_ids` (row ids of `known_vectors`) grows with the chunks kept; the new matrix is
    returned."""
    fresh, statuses = [], []
    for source_id, index, span, location in candidates:
        chunk_id = content_id("chunk", span.text)
        item = f"{source_id}#{index}"
        owner = known_chunks.get(chunk_id)
        if owner == source_id:
            continue  # stored by an earlier, interrupted run
        if owner is not None:
            statuses.append(status("chunk", item, "rejected", "exact_duplicate", chunk_id))
            continue
        known_chunks[chunk_id] = source_id
        fresh.append((chunk_id, source_id, index, span, item, location))
    vectors = embed([span.text for _, _, _, span, _, _ in fresh])
    matches = near_duplicates(vectors, known_vectors, threshold)
    kept, kept_vectors = [], []
    for (chunk_id, source_id, index, span, item, location), vector, match in zip(
        fresh, vectors, matches, strict=True
    ):
        if match is not None:
            statuses.append(
                status(
                    "chunk",
                    item,
                    "rejected",
                    "near_duplicate",
                    f"cosine {match[1]:.3f} to {known_ids[match[0]]}",
                )
            )
            continue
        kept.append(
            Chunk(
                chunk_id=chunk_id,
                source_id=source_id,
                index=index,
                text=span.text,
                char_start=span.start,
                char_end=span.end,
                embedding=[float(x) for x in vector],
                location=location,
            )
        )
        kept_vectors.append(vector)
        known_ids.append(chunk_id)
        statuses.append(status("chunk", item, "done", "kept", chunk_id))
    return kept, statuses, as_matrix([*known_vectors, *kept_vectors])


def _groups(names: list[str]) -> list[list[str]]:
    return [names[i : i + FILES_PER_BATCH] for i in range(0, len(names), FILES_PER_BATCH)]
