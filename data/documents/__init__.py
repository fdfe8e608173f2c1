"""Documents: reading a folder's files (converted in a child process where they need
it), their markup as a reader sees it, chunking, answer spans, and ingest into the lake."""

from data.documents.chunking import chunk_text, split_sentences
from data.documents.ingest import Progress, ingest_documents
from data.documents.readers import (
    Document,
    ReadLimits,
    Rejected,
    discover,
    normalise,
    read_document,
    regular_file,
)
from data.documents.settings import IngestConfig
from data.documents.spans import (
    BOOLEANS,
    MONTHS,
    answer_candidates,
    generic_words,
    is_common,
    ranked_candidates,
)

__all__ = [
    "BOOLEANS",
    "Document",
    "IngestConfig",
    "MONTHS",
    "Progress",
    "ReadLimits",
    "Rejected",
    "answer_candidates",
    "chunk_text",
    "discover",
    "generic_words",
    "ingest_documents",
    "is_common",
    "normalise",
    "ranked_candidates",
    "read_document",
    "regular_file",
    "split_sentences",
]
