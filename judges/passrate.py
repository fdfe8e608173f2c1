"""Pass-rate statistics: Wilson interval, pass@k, band and pool labels, learnability."""

from __future__ import annotations

import math
from statistics import NormalDist

from data.lake import POOL_CEILINGS, Band, Pool


def wilson_interval(passes: int, n: int, confidence: float) -> tuple[float, float]:
    """Two-sided Wilson score interval for a binomial pass rate."""
    if n <= 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = passes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k(n: int, passes: int, k: int) -> float:
    """Unbiased pass@k from n samples with `passes` correct (Chen et al., 2021)."""
    if k > n:
        raise ValueError(f"k={k} exceeds n={n}")
    if n - passes < k:
        return 1.0
    return 1.0 - math.comb(n - passes, k) / math.comb(n, k)


def band(pass_rate: float, low: float, high: float) -> Band:
    """`in_band` when low <= p <= high: the tasks RL learns from."""
    if pass_rate > high:
        return "too_easy"
    if pass_rate < low:
        return "too_hard"
    return "in_band"


def pool(pass_rate: float) -> Pool:
    """prime-rl's difficulty pool of a pass rate: hard <= 0.25, normal <= 0.75, easy above."""
    return next((name for name, top in POOL_CEILINGS.items() if pass_rate <= top), "easy")


def learnability(pass_rate: float) -> float:
    """4p(1-p): 1 at p = 0.5, 0 for tasks always or never solved."""
    return 4 * pass_rate * (1 - pass_rate)
