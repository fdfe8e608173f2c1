"""Near-duplicate detection: chunks per second, and how it grows with the corpus.

`data.llm.embeddings.near_duplicates` compares each chunk's embedding with every chunk kept before
it, so the work grows with the square of the corpus. This measures, on synthetic unit vectors
(384 dimensions, as the embedding model gives; one in ten a near copy of an earlier one, which
must be found), chunks per second:

- **row by row** (`block=1`): one matrix-vector product per chunk, the baseline;
- **blocked** (`block=256`, the default): a matrix product per block of chunks against the
  pool and within the block, then each chunk in order (the same answers).

Both run at the smaller sizes, side by side with their ratio; the row-by-row baseline is left
out above `--baseline-max` chunks (it would take minutes). The growth exponent between two sizes
is log(time ratio) / log(size ratio): 2 is quadratic. Run from the repository root:
`.venv/bin/python bench/dedup.py [--sizes 2000 10000 100000] [--baseline-max 10000]`.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.llm import DIMENSIONS, near_duplicates  # noqa: E402

THRESHOLD = 0.95  # the ingest default


def corpus(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """`n` unit vectors, every tenth a near copy (cosine about 0.99) of an earlier one; and
    how many copies there are."""
    vectors = rng.normal(size=(n, DIMENSIONS)).astype(np.float32)
    copies = list(range(10, n, 10))
    for i in copies:
        vectors[i] = vectors[rng.integers(0, i - 1)] + 0.08 * vectors[i]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors, len(copies)


def timed(vectors: np.ndarray, block: int, copies: int) -> float:
    started = time.perf_counter()
    found = near_duplicates(vectors, np.empty((0, DIMENSIONS), np.float32), THRESHOLD, block)
    seconds = time.perf_counter() - started
    duplicates = sum(m is not None for m in found)
    if duplicates != copies:
        raise SystemExit(f"found {duplicates} near duplicates, planted {copies}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 10_000, 100_000])
    parser.add_argument("--baseline-max", type=int, default=10_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'chunks':>8} {'row by row/s':>13} {'blocked/s':>10} {'blocked/row':>12} {'growth':>7}")
    previous: tuple[int, float] | None = None
    for n in args.sizes:
        vectors, copies = corpus(n, rng)
        blocked = timed(vectors, 256, copies)
        baseline = timed(vectors, 1, copies) if n <= args.baseline_max else None
        growth = ""
        if previous is not None:
            growth = f"{math.log(blocked / previous[1]) / math.log(n / previous[0]):.2f}"
        base = f"{n / baseline:>13,.0f}" if baseline else f"{'-':>13}"
        ratio = f"{baseline / blocked:>12.1f}" if baseline else f"{'-':>12}"
        print(f"{n:>8,} {base} {n / blocked:>10,.0f} {ratio} {growth:>7}")
        previous = (n, blocked)


if __name__ == "__main__":
    main()
