"""Settings of document ingest (`[ingest]`): chunking, size limits and the converter's limits."""

from __future__ import annotations

from pydantic import Field

from data.settings import Settings


class IngestConfig(Settings):
    chunk_chars: int = Field(default=900, ge=200)
    min_chunk_chars: int = Field(default=80, ge=1)
    max_file_bytes: int = Field(default=20_000_000, ge=1)
    near_duplicate_threshold: float = Field(default=0.95, gt=0, le=1)
    # a PDF, Office, e-book, notebook or markup file is converted in a child process with these
    # limits (data/documents/conversion.py): past them it is refused with the reason, the run
    # goes on
    convert_timeout_s: float = Field(default=60.0, gt=0)
    convert_memory_mb: int = Field(default=2048, ge=256)
