"""Adaptive pass-rate estimation vs a fixed k = 16, on simulated tasks with known pass rates.

A fake solver passes each attempt of a task with the task's true pass rate p. Every task's 32
attempt outcomes are drawn once and read by both methods (common random numbers): fixed-16
reads the first 16, the adaptive rule as many as it asks for.

The adaptive rule's prior is learnt the way the pipeline learns it: from the outcomes (never the
true p) of 3,000 earlier tasks calibrated under Jeffreys' prior. The earlier tasks and the tasks
measured are drawn from pass-rate populations, alike or not:

    mix    30% Beta(0.5, 6), 30% Beta(6, 0.5), 40% Uniform(0, 1)
    hard   Beta(0.5, 6)          easy   Beta(6, 0.5)          flat   Uniform(0, 1)
    edges  a band edge (0.2 or 0.8) plus Normal(0, 0.08) noise

Accuracy: the label "in band" (estimate in [0.2, 0.8] for fixed-16; the rule's decision for the
adaptive method) matches the truth, or the true p lies within 0.05 of a band edge. Each row
gives, over the seeds, the mean and the worst of (adaptive accuracy - fixed accuracy) and of
(adaptive calls / fixed calls).

    .venv/bin/python bench/calibration.py [--tasks 4000] [--seeds 8] [--round-size 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from judges.adaptive import LABELS, BandRule, Policy, Prior, matching_policy  # noqa: E402

LOW, HIGH, ZONE, REFERENCE_K, MAX_ATTEMPTS = 0.2, 0.8, 0.05, 16, 32
PassRates = Callable[[np.random.Generator, int], np.ndarray]


def mix(rng: np.random.Generator, n: int) -> np.ndarray:
    kind = rng.random(n)
    return np.where(kind < 0.3, hard(rng, n), np.where(kind < 0.6, easy(rng, n), flat(rng, n)))


def hard(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.beta(0.5, 6, n)


def easy(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.beta(6, 0.5, n)


def flat(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.random(n)


def edges(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.clip(np.where(rng.random(n) < 0.5, LOW, HIGH) + rng.normal(0, 0.08, n), 0, 1)


POPULATIONS: dict[str, PassRates] = {
    "mix": mix,
    "hard": hard,
    "easy": easy,
    "flat": flat,
    "edges": edges,
}


def walk(policy: Policy, outcomes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(attempts used, passes, label index) per task, reading each task's outcomes in order."""
    used, passes, labels = zip(*(policy.walk(row) for row in outcomes), strict=True)
    return np.array(used), np.array(passes), np.array(labels)


def learnt_policy(
    rng: np.random.Generator, earlier: PassRates, round_size: int = 2, tasks: int = 3000
) -> Policy:
    """The adaptive policy as the pipeline comes by it: its prior fitted to the outcomes of
    `tasks` earlier tasks calibrated under Jeffreys' prior."""
    rule = BandRule(LOW, HIGH, ZONE)
    jeffreys = matching_policy(Prior.jeffreys(), rule, REFERENCE_K, round_size, MAX_ATTEMPTS)
    history = rng.random((tasks, MAX_ATTEMPTS)) < earlier(rng, tasks)[:, None]
    used, passes, _ = walk(jeffreys, history)
    prior = Prior.fit(list(zip(used.tolist(), passes.tolist(), strict=True)))
    return matching_policy(prior, rule, REFERENCE_K, round_size, MAX_ATTEMPTS)


def against_the_truth(
    policy: Policy, rng: np.random.Generator, pass_rates: PassRates, tasks: int
) -> tuple[float, float, float]:
    """(adaptive calls / fixed-16 calls, accuracy of fixed 16, accuracy of `policy`) on `tasks`
    simulated tasks of known pass rate, both reading the same outcomes."""
    p = pass_rates(rng, tasks)
    outcomes = rng.random((tasks, MAX_ATTEMPTS)) < p[:, None]
    truth = (p >= LOW) & (p <= HIGH)
    either = (np.abs(p - LOW) <= ZONE) | (np.abs(p - HIGH) <= ZONE)
    estimate = outcomes[:, :REFERENCE_K].mean(axis=1)
    fixed_says = (estimate >= LOW) & (estimate <= HIGH)
    used, _, labels = walk(policy, outcomes)
    says = labels == LABELS.index("in_band")
    fixed_right = float(np.mean((fixed_says == truth) | either))
    right = float(np.mean((says == truth) | either))
    return float(used.sum() / (REFERENCE_K * tasks)), fixed_right, right


SCENARIOS = [
    ("mix", "mix"),
    *((earlier, now) for earlier in ("easy", "hard", "edges") for now in ("hard", "flat", "edges")),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--round-size", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    print(
        f"{args.tasks} tasks x {args.seeds} seeds per row; band [{LOW}, {HIGH}], indifference"
        f" {ZONE}; rounds of {args.round_size}, cap {MAX_ATTEMPTS}; fixed k = {REFERENCE_K}"
    )
    print(
        f"{'earlier -> now':<16}{'fixed acc':>10}{'diff mean':>11}{'diff worst':>12}"
        f"{'ratio mean':>12}{'ratio worst':>13}"
    )
    for earlier, now in SCENARIOS:
        rows = []
        for seed in range(args.seeds):
            rng = np.random.default_rng(100 + seed)
            policy = learnt_policy(rng, POPULATIONS[earlier], args.round_size)
            rows.append(against_the_truth(policy, rng, POPULATIONS[now], args.tasks))
        ratio, fixed_right, right = (np.array(column) for column in zip(*rows, strict=True))
        diff = right - fixed_right
        print(
            f"{earlier + ' -> ' + now:<16}{fixed_right.mean():>10.4f}{diff.mean():>+11.4f}"
            f"{diff.min():>+12.4f}{ratio.mean():>12.3f}{ratio.max():>13.3f}"
        )
    print(f"{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
