"""Adaptive pass-rate estimation vs a fixed k = 16, on simulated tasks with known pass rates.

Each simulated task has a true pass rate p drawn from 30% Beta(0.5, 6), 30% Beta(6, 0.5) and
40% Uniform(0, 1); a fake solver passes each attempt with probability p. Every task's 32
attempt outcomes are drawn once and shared by all methods (common random numbers): fixed-16
reads the first 16, the adaptive rule reads as many as it asks for.

The adaptive rule's prior is learnt the way the pipeline learns it: from the outcomes (never the
true p) of earlier tasks, here a separate population calibrated under the default prior.

Accuracy: the label "in band" (estimate in [0.2, 0.8] for fixed-16; the rule's decision for the
adaptive method) matches the truth, or the true p lies within 0.05 of a band edge.

    .venv/bin/python bench/calibration.py [--tasks 5000] [--round-size 2] [--max-attempts 32]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from judges.adaptive import LABELS, BandRule, Policy, Prior, matching_policy  # noqa: E402

LOW, HIGH, ZONE, REFERENCE_K = 0.2, 0.8, 0.05, 16


def population(rng: np.random.Generator, n: int) -> np.ndarray:
    kind = rng.random(n)
    hard, easy, flat = rng.beta(0.5, 6, n), rng.beta(6, 0.5, n), rng.random(n)
    return np.where(kind < 0.3, hard, np.where(kind < 0.6, easy, flat))


def walk(policy: Policy, outcomes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(attempts used, passes, label index) per task, reading each task's outcomes in order."""
    used, passes, labels = zip(*(policy.walk(row) for row in outcomes), strict=True)
    return np.array(used), np.array(passes), np.array(labels)


def accuracy(says_in_band: np.ndarray, p: np.ndarray) -> float:
    truth = (p >= LOW) & (p <= HIGH)
    near_edge = (np.abs(p - LOW) <= ZONE) | (np.abs(p - HIGH) <= ZONE)
    return float(np.mean((says_in_band == truth) | near_edge))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--round-size", type=int, default=2)
    parser.add_argument("--max-attempts", type=int, default=32)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rule = BandRule(LOW, HIGH, ZONE)
    in_band = LABELS.index("in_band")

    started = time.perf_counter()
    jeffreys = matching_policy(
        Prior.jeffreys(), rule, REFERENCE_K, args.round_size, args.max_attempts
    )
    history = rng.random((args.tasks, args.max_attempts)) < population(rng, args.tasks)[:, None]
    used, passes, _ = walk(jeffreys, history)
    prior = Prior.fit(list(zip(used.tolist(), passes.tolist(), strict=True)))
    empirical = matching_policy(prior, rule, REFERENCE_K, args.round_size, args.max_attempts)
    setup = time.perf_counter() - started

    p = population(rng, args.tasks)
    outcomes = rng.random((args.tasks, args.max_attempts)) < p[:, None]
    estimate = outcomes[:, :REFERENCE_K].mean(axis=1)
    rows = [
        ("fixed k=16", np.full(args.tasks, REFERENCE_K), (estimate >= LOW) & (estimate <= HIGH))
    ]
    for name, policy in (
        ("adaptive, Jeffreys prior", jeffreys),
        ("adaptive, empirical prior", empirical),
    ):
        used, _, labels = walk(policy, outcomes)
        rows.append((name, used, labels == in_band))

    print(
        f"{args.tasks} tasks: 30% Beta(0.5,6), 30% Beta(6,0.5), 40% U(0,1); band [{LOW}, {HIGH}],"
        f" indifference {ZONE}; rounds of {args.round_size}, cap {args.max_attempts}"
    )
    print(f"prior learnt from {args.tasks} other tasks' outcomes; policies solved in {setup:.1f} s")
    print(f"{'method':<28}{'calls/task':>11}{'accuracy':>10}{'max calls':>11}")
    for name, used, says in rows:
        print(f"{name:<28}{used.mean():>11.2f}{accuracy(says, p):>10.4f}{used.max():>11}")
    fixed_calls, adaptive_calls = rows[0][1].sum(), rows[2][1].sum()
    print(f"ratio {adaptive_calls / fixed_calls:.3f}")
    print(f"accuracy fixed {accuracy(rows[0][2], p):.4f} adaptive {accuracy(rows[2][2], p):.4f}")


if __name__ == "__main__":
    main()
