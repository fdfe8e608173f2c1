"""Adaptive pass-rate estimation: attempts in small rounds until the band label is settled.

What calibration must get right is a task's band: below, inside or above [low, high]. After each
round of attempts a Bayes-optimal sequential rule decides whether more attempts are worth it:

- the prior over the pass rate is a discrete grid learnt from earlier tasks' outcomes
  (nonparametric maximum likelihood by EM; the stopping rule leaves the likelihood unbiased),
  per task from the earlier tasks like it (`judges.task_prior`), or Jeffreys' Beta(1/2, 1/2)
  without enough history;
- a wrong band costs 1, except within `indifference` of a band edge, where both neighbouring
  labels count as right; each attempt costs `cost`;
- backward induction over the states (attempts, passes), in steps of one round up to
  `max_attempts`, gives the policy once per prior; a task then only walks the table.

The attempt cost is not a knob: it is set by bisection to the largest cost whose expected error
under the priors, on average over the tasks they belong to, is no worse than a fixed design of
`reference_k` attempts labelled by its point estimate. One cost for all tasks puts the attempts
where a band is in doubt; the result is as accurate as k = 16 with as few attempts as the
evidence allows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from data.lake import Band
from judges.passrate import band

LABELS: tuple[Band, ...] = ("too_hard", "in_band", "too_easy")
GRID = np.linspace(0.0, 1.0, 201)
SAMPLE = -1  # a policy decision: attempt another round


def _binomial(n: int) -> np.ndarray:
    """P(s passes of n | p) for s = 0..n (rows) at every grid point (columns)."""
    s = np.arange(n + 1)[:, None]
    comb = np.array([math.comb(n, k) for k in range(n + 1)], dtype=float)[:, None]
    return comb * GRID[None, :] ** s * (1 - GRID[None, :]) ** (n - s)


@dataclass(frozen=True)
class Prior:
    """Probability weights over GRID."""

    weights: np.ndarray

    @classmethod
    def jeffreys(cls) -> Prior:
        inner = GRID.clip(1e-3, 1 - 1e-3)
        density = 1.0 / np.sqrt(inner * (1 - inner))
        return cls(density / density.sum())

    @classmethod
    def fit(
        cls, outcomes: Sequence[tuple[int, int]], iterations: int = 300, floor: float = 0.1
    ) -> Prior:
        """The nonparametric maximum-likelihood prior of (attempts, passes) pairs, mixed with
        `floor` of Jeffreys' prior: the NPMLE puts zero mass on whole ranges of pass rate, and
        no evidence could then move a task there."""
        if not outcomes:
            return cls.jeffreys()
        counts = np.array(outcomes, dtype=float)
        n, s = counts[:, :1], counts[:, 1:]
        likelihood = GRID[None, :] ** s * (1 - GRID[None, :]) ** (n - s)
        weights = cls.jeffreys().weights
        for _ in range(iterations):
            joint = likelihood * weights[None, :]
            joint /= joint.sum(axis=1, keepdims=True)
            weights = joint.mean(axis=0)
        return cls((1 - floor) * weights + floor * cls.jeffreys().weights)

    def mean(self) -> float:
        return float(GRID @ self.weights)


@dataclass(frozen=True)
class BandRule:
    """The band [low, high] and the indifference zone around its edges."""

    low: float
    high: float
    indifference: float = 0.05

    def acceptable(self) -> np.ndarray:
        """acceptable[label, grid point]: is that label right for that pass rate?"""
        d, rate = self.indifference, GRID
        return np.array(
            [
                rate < self.low + d,
                (rate >= self.low - d) & (rate <= self.high + d),
                rate > self.high - d,
            ],
            dtype=float,
        )

    def point_label(self, rate: float) -> int:
        """The label of a point estimate (the fixed design's rule)."""
        return LABELS.index(band(rate, self.low, self.high))


@dataclass(frozen=True)
class Policy:
    """What to do in each state: `decisions[n][s]` is SAMPLE or an index into LABELS."""

    decisions: dict[int, np.ndarray]
    round_size: int
    max_attempts: int
    cost: float
    expected_error: float  # under the prior it was solved for
    expected_attempts: float

    def walk(self, outcomes: Sequence[int]) -> tuple[int, int, int]:
        """(attempts used, passes, label index) reading pass (1) / fail (0) outcomes in order:
        what calibration would do if the solver gave exactly these answers."""
        n = s = 0
        while (label := self.decide(n, s)) == SAMPLE:
            s += int(sum(outcomes[n : n + self.round_size]))
            n += self.round_size
        return n, s, label

    def decide(self, attempts: int, passes: int) -> int:
        """SAMPLE, or the label index once the evidence settles it (or the cap is reached)."""
        if attempts == 0:
            return SAMPLE
        if attempts not in self.decisions:
            raise ValueError(f"{attempts} attempts is not a whole number of rounds")
        return int(self.decisions[attempts][passes])


def solve(prior: Prior, rule: BandRule, cost: float, round_size: int, max_attempts: int) -> Policy:
    """The Bayes-optimal stopping policy for one attempt cost (backward induction)."""
    wrong = 1.0 - rule.acceptable()
    step = _binomial(round_size)  # [x, grid]
    steps = list(range(round_size, max_attempts + 1, round_size))
    value: dict[int, np.ndarray] = {}
    errors: dict[int, np.ndarray] = {}
    spent: dict[int, np.ndarray] = {}
    decisions: dict[int, np.ndarray] = {}
    for n in reversed(steps):
        s = np.arange(n + 1)[:, None]
        posterior = prior.weights[None, :] * GRID[None, :] ** s * (1 - GRID[None, :]) ** (n - s)
        posterior /= posterior.sum(axis=1, keepdims=True)
        risk = posterior @ wrong.T  # [s, label]
        label, stop = risk.argmin(axis=1), risk.min(axis=1)
        nxt = n + round_size
        if nxt > max_attempts:
            value[n], errors[n], spent[n] = stop, stop, np.full(n + 1, float(n))
            decisions[n] = label
            continue
        predictive = posterior @ step.T  # [s, x]
        after = s + np.arange(round_size + 1)[None, :]
        go_on = cost * round_size + (predictive * value[nxt][after]).sum(axis=1)
        sample = go_on < stop
        value[n] = np.where(sample, go_on, stop)
        errors[n] = np.where(sample, (predictive * errors[nxt][after]).sum(axis=1), stop)
        spent[n] = np.where(sample, (predictive * spent[nxt][after]).sum(axis=1), float(n))
        decisions[n] = np.where(sample, SAMPLE, label)
    first = step @ prior.weights  # P(x passes in the first round)
    return Policy(
        decisions=decisions,
        round_size=round_size,
        max_attempts=max_attempts,
        cost=cost,
        expected_error=float(first @ errors[round_size]),
        expected_attempts=float(first @ spent[round_size]),
    )


def fixed_error(prior: Prior, rule: BandRule, k: int) -> float:
    """Expected error under `prior` of k attempts labelled by their point estimate."""
    labels = [rule.point_label(s / k) for s in range(k + 1)]
    right = rule.acceptable()[labels]  # [s, grid]
    return float(1.0 - (_binomial(k) * right).sum(axis=0) @ prior.weights)


def matching_cost(
    priors: Sequence[Prior],
    rule: BandRule,
    reference_k: int,
    round_size: int,
    max_attempts: int,
    steps: int = 40,
) -> float:
    """The largest attempt cost at which the policies solved for `priors` are, on average over
    them, as accurate as fixed `reference_k`. One cost for many tasks spends attempts where the
    band is in doubt: each task's policy trades its own error against the same price."""
    if round_size < 1 or max_attempts < round_size:
        raise ValueError("need 1 <= round_size <= max_attempts")
    if not priors:
        raise ValueError("no priors to match")
    target = float(np.mean([fixed_error(prior, rule, reference_k) for prior in priors]))

    def error(cost: float) -> float:
        return float(
            np.mean([solve(p, rule, cost, round_size, max_attempts).expected_error for p in priors])
        )

    cheap, dear = 1e-7, 1.0
    for _ in range(steps):
        cost = math.sqrt(cheap * dear)
        if error(cost) <= target:
            cheap = cost
        else:
            dear = cost
    return cheap


def matching_policy(
    prior: Prior, rule: BandRule, reference_k: int, round_size: int, max_attempts: int
) -> Policy:
    """The policy with the largest attempt cost that is as accurate as fixed `reference_k`."""
    cost = matching_cost([prior], rule, reference_k, round_size, max_attempts)
    return solve(prior, rule, cost, round_size, max_attempts)
