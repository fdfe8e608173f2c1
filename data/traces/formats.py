"""Trace readers: production exchanges from three formats into one conversation shape.

- OpenAI-style JSONL: one exchange per line, `messages` (or `request.messages`, `body.messages`)
  plus the response as a chat completion, a batch-output `{"body": ...}`, a message or a
  string; or `messages` ending in the assistant's answer. Tools from `tools`.
- OpenTelemetry GenAI spans as JSON (an OTLP export, one per line or one per file, or bare
  spans): `gen_ai.input.messages` / `gen_ai.output.messages` / `gen_ai.system_instructions` /
  `gen_ai.tool.definitions` (the current conventions) or the indexed `gen_ai.prompt.N.*` /
  `gen_ai.completion.N.*` attributes. The last chat span of a trace holds its whole history.
- The interception proxy's own records (`proxy_calls` parquet shards): the last successful call
  of each rollout, plus its response.

This module finds the files and reads each unit; the shape and OpenAI-style exchanges are in
`data.traces.conversation`, the spans in `data.traces.otel`, the proxy's records in
`data.traces.proxy_records`. Nothing here scrubs: the ingestion step does, before anything is
stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from data.documents import Rejected, regular_file
from data.formats import BINARY_SNIFF_BYTES
from data.traces.conversation import (
    MAX_DEPTH,
    Item,
    Malformed,
    guarded,
    nesting_depth,
    openai_exchange,
)
from data.traces.otel import is_chat_span, otel_spans, span_traces
from data.traces.proxy_records import PROXY_COLUMNS, proxy_rollouts, read_proxy_records

MAX_RECORD_BYTES = 16_000_000  # a JSONL line, or a whole .json file, larger than this is refused
SKIP_BYTES = 1 << 20  # an overlong line is skipped in reads of this size, never held whole


def discover(paths: list[str]) -> list[Path]:
    """Trace files under `paths` (files or folders): .jsonl, .ndjson, .json, .parquet.

    Folders are walked without following symlinked folders; any other entry with a trace
    suffix is listed, so that a FIFO or a link loop gets its reason from `read_file`."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(
                p
                for p in path.rglob("*")
                if not p.is_dir() and p.suffix in (".jsonl", ".ndjson", ".json", ".parquet")
            )
        else:
            found.append(path)
    return found


def units(paths: list[str]) -> list[tuple[str, list[Path]]]:
    """What to read together, named: each JSON(L) file alone, and the parquet shards of one
    folder as one set (a rollout's calls are spread over the proxy's shards)."""
    found: dict[str, list[Path]] = {}
    for path in discover(paths):
        name = str(path.parent) if path.suffix == ".parquet" else str(path)
        found.setdefault(name, []).append(path)
    return sorted(found.items())


def read_unit(files: list[Path], max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[Item]:
    """The conversations of one unit (see `units`)."""
    if files[0].suffix == ".parquet":
        yield from read_proxy_records(files)
    else:
        yield from read_file(files[0], max_record_bytes)


def read_file(path: Path, max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[Item]:
    """Every conversation in `path`, and a `Malformed` for each line (or file) that is not.

    The file is read a line at a time: an undecodable line or one over `max_record_bytes`
    is refused on its own (the overlong one without ever being held whole), and the rest of
    the file is still read. A file that is not a regular file, or starts with NUL bytes, is
    refused as a whole."""
    info = regular_file(path)
    if isinstance(info, Rejected):
        yield Malformed(str(path), info.reason, info.detail)
        return
    if path.suffix == ".parquet":
        yield from read_proxy_records([path])
        return
    try:
        with path.open("rb") as handle:
            if b"\x00" in handle.read(BINARY_SNIFF_BYTES):
                yield Malformed(str(path), "binary", "NUL bytes in content")
                return
            handle.seek(0)
            if path.suffix != ".json":
                yield from _documents(str(path), _lines(str(path), handle, max_record_bytes))
            elif info.st_size > max_record_bytes:
                detail = f"{info.st_size} bytes > {max_record_bytes}"
                yield Malformed(str(path), "too_large", detail)
            else:
                yield from _documents(str(path), [_decoded(str(path), handle.read())])
    except OSError as exc:
        yield Malformed(str(path), "unreadable_file", str(exc))


def _lines(name: str, handle: Any, limit: int) -> Iterator[tuple[str, str] | Malformed]:
    """The non-blank lines of a binary file handle as `(origin, text)`, or a `Malformed` for
    a line over `limit` bytes (skipped in bounded reads) or not UTF-8."""
    for number, line in enumerate(iter(lambda: handle.readline(limit + 1), b""), 1):
        origin = f"{name}:{number}"
        if len(line) > limit and not line.endswith(b"\n"):
            size = len(line) + _skip_line(handle)
            yield Malformed(origin, "too_large", f"line of {size} bytes > {limit}")
        elif line.strip():
            yield _decoded(origin, line)


def _skip_line(handle: Any) -> int:
    """Read past the rest of the current line; returns how many bytes that was."""
    skipped = 0
    while chunk := handle.readline(SKIP_BYTES):
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return skipped


def _decoded(origin: str, raw: bytes) -> tuple[str, str] | Malformed:
    try:
        return origin, raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return Malformed(origin, "undecodable", f"not UTF-8 at byte {exc.start}")


def _documents(name: str, documents: Iterable[tuple[str, str] | Malformed]) -> Iterator[Item]:
    spans: list[tuple[str, dict[str, Any]]] = []
    proxy_rows: list[dict[str, Any]] = []
    for entry in documents:
        if isinstance(entry, Malformed):
            yield entry
            continue
        origin, raw = entry
        try:
            document = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            yield Malformed(origin, "invalid_json", str(exc) or type(exc).__name__)
            continue
        if nesting_depth(document) > MAX_DEPTH:
            yield Malformed(origin, "too_deep", f"JSON nested deeper than {MAX_DEPTH} levels")
            continue
        if isinstance(document, dict) and set(document) >= PROXY_COLUMNS:
            proxy_rows.append(document)
            continue
        found = guarded(origin, lambda document=document: otel_spans(document))
        if isinstance(found, Malformed):
            yield found
        elif found is None:
            yield guarded(origin, lambda d=document, o=origin: openai_exchange(d, o))
        else:
            chat = [s for s in found if guarded(origin, lambda s=s: is_chat_span(s)) is True]
            if chat:
                spans += [(origin, s) for s in chat]
            else:
                yield Malformed(origin, "no_genai_spans", f"{len(found)} spans, none a chat span")
    yield from span_traces(name, spans)
    yield from proxy_rollouts(proxy_rows, name)


# --- OpenAI-style exchanges --------------------------------------------------------------


# --- OpenTelemetry GenAI spans -----------------------------------------------------------


# --- the interception proxy's records ----------------------------------------------------
