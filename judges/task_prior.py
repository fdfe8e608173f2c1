"""A prior over one task's pass rate, from what is known before its first attempt.

The history is the earlier calibrations against the same solver: each earlier task's features
and its (attempts, passes). The prior of a new task t is a local empirical Bayes estimate:

    G          = the population prior, fitted to every earlier outcome (`Prior.fit`)
    post_h     = G x likelihood of h's outcome, normalised (what h's attempts say of h)
    prior(t)   = (sum_h w(t, h) post_h + m G) / (sum_h w(t, h) + m)

With equal weights this is G again (the fitted G is the average of the posteriors), so the
weights only move a task's prior toward the earlier tasks like it:

    w(t, h) = rho ** (categories that differ: kind, level, environment)
              x exp(-|x_t - x_h|^2 / 2 b^2)   (standardised log sizes: question, answer,
                                                evidence, tests, recorded tool calls, turns)
              x related   if one is the other's repair parent or root, an earlier version
                          (a reviewer's edit, a remedied verifier) or the task it targets
              x sibling   if they share a source chunk

The knobs (rho, b, related, sibling, m) are chosen from a small grid by leave-one-out: each
earlier task's outcome is scored under the prior the others give it, never its own.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from data.lake import Task
from judges.adaptive import GRID, Prior

CATEGORIES = ("kind", "level", "environment")
SIZES = ("question", "answer", "evidence", "tests", "tool_calls", "turns")
MOST_HISTORY = 4000  # the most recent earlier tasks a prior is made from
MOST_FITTED = 800  # of those, the most the knobs are chosen on (a deterministic subset)


@dataclass(frozen=True)
class Features:
    """What is known of a task before its first attempt."""

    task_id: str
    categories: tuple[str, ...]  # CATEGORIES
    sizes: tuple[float, ...]  # SIZES, log(1 + x)
    relatives: frozenset[str]  # tasks in its lineage: repair parent and root, earlier versions
    chunks: frozenset[str]  # the source chunks it was made from

    @property
    def environment(self) -> str:
        return self.categories[CATEGORIES.index("environment")]

    @classmethod
    def of(cls, task: Task, environment: str) -> Features:
        lineage = task.lineage
        relatives = {
            *([lineage.repair.parent, lineage.repair.root] if lineage.repair else []),
            *([lineage.remedied.parent] if lineage.remedied else []),
            *([lineage.review.task_id] if lineage.review else []),
            *([lineage.target.task_id] if lineage.target else []),
        }
        tests = task.workspace.test_patch.count("def test") if task.workspace else 0
        sizes = (
            len(task.question),
            len(task.answer),
            sum(len(e.quote) for e in task.evidence),
            tests,
            len(task.environment.recorded) if task.environment else 0,
            task.world.max_turns if task.world else 0,
        )
        return cls(
            task_id=task.task_id,
            categories=(task.kind, str(lineage.knobs.get("level", "")), environment),
            sizes=tuple(math.log1p(x) for x in sizes),
            relatives=frozenset(relatives - {task.task_id}),
            chunks=frozenset(s.chunk_id for s in task.source if s.chunk_id),
        )


@dataclass(frozen=True)
class Earlier:
    """An earlier task's features and what its calibration found."""

    features: Features
    attempts: int
    passes: int


@dataclass(frozen=True)
class Knobs:
    """How much each kind of likeness counts (see the module docstring)."""

    rho: float = 0.2
    bandwidth: float = 1.0  # in standard deviations of each size; inf: sizes do not count
    related: float = 10.0
    sibling: float = 3.0
    pseudo: float = 4.0  # m: the weight of the population prior G


KNOB_GRID = [
    Knobs(rho, bandwidth, related, sibling, pseudo)
    for rho, bandwidth, related, sibling, pseudo in itertools.product(
        (0.02, 0.2, 1.0),
        (0.5, 1.0, 2.0, math.inf),
        (1.0, 10.0, 100.0),
        (1.0, 5.0),
        (1.0, 4.0, 16.0),
    )
]


@dataclass(frozen=True)
class TaskPrior:
    """One task's prior and how much of the history it rests on."""

    prior: Prior
    alike: float  # sum of the weights: how many earlier tasks it counts as like this one
    related: int  # earlier tasks in its lineage or from its source chunks


@dataclass
class TaskPriors:
    """Per-task priors learnt from one solver's history (`fit`)."""

    history: list[Earlier]
    knobs: Knobs
    population: Prior
    held_out_log_likelihood: float  # per earlier task, under the chosen knobs
    _posteriors: np.ndarray = field(repr=False)  # [earlier task, grid]
    _scale: np.ndarray = field(repr=False)  # the sizes' standard deviations

    @classmethod
    def fit(cls, history: Sequence[Earlier], grid: Sequence[Knobs] = KNOB_GRID) -> TaskPriors:
        """Choose the knobs by leave-one-out likelihood on (a subset of) `history`."""
        if not history:
            raise ValueError("a task prior needs at least one earlier task")
        history = list(history)[-MOST_HISTORY:]
        population = Prior.fit([(e.attempts, e.passes) for e in history])
        likelihood = _likelihoods(history)
        posteriors = likelihood * population.weights[None, :]
        posteriors /= posteriors.sum(axis=1, keepdims=True)
        sizes = np.array([e.features.sizes for e in history])
        scale = np.where(sizes.std(axis=0) > 0, sizes.std(axis=0), 1.0)
        fitted = spread(len(history), MOST_FITTED)
        own = [history[i].features for i in fitted]
        parts = _likeness(own, own, scale)
        np.fill_diagonal(parts.related, False)
        predictive = likelihood[fitted] @ posteriors[fitted].T  # [h, j]: h's outcome under j's
        np.fill_diagonal(predictive, 0.0)
        baseline = likelihood[fitted] @ population.weights  # [h]: h's outcome under G
        best, best_score = grid[0], -math.inf
        for knobs in grid:
            weights = parts.weights(knobs)
            np.fill_diagonal(weights, 0.0)
            held_out = ((weights * predictive).sum(axis=1) + knobs.pseudo * baseline) / (
                weights.sum(axis=1) + knobs.pseudo
            )
            score = float(np.log(np.maximum(held_out, 1e-300)).mean())
            if score > best_score:
                best, best_score = knobs, score
        return cls(history, best, population, best_score, posteriors, scale)

    def prior_of(self, features: Features) -> TaskPrior:
        """`features`' prior; an earlier calibration of the same task is left out."""
        parts = _likeness([features], [e.features for e in self.history], self._scale)
        weights = parts.weights(self.knobs)[0]
        weights[[e.features.task_id == features.task_id for e in self.history]] = 0.0
        mixed = (weights @ self._posteriors + self.knobs.pseudo * self.population.weights) / (
            weights.sum() + self.knobs.pseudo
        )
        return TaskPrior(Prior(mixed), float(weights.sum()), int(parts.related[0].sum()))


@dataclass(frozen=True)
class _Likeness:
    """The pieces of w(t, h) for every pair, before the knobs weigh them."""

    differ: np.ndarray  # categories that differ
    distance: np.ndarray  # squared standardised distance between the sizes
    related: np.ndarray  # in each other's lineage
    sibling: np.ndarray  # a source chunk in common

    def weights(self, knobs: Knobs) -> np.ndarray:
        w = knobs.rho**self.differ
        if math.isfinite(knobs.bandwidth):
            w = w * np.exp(-self.distance / (2 * knobs.bandwidth**2))
        w = w * np.where(self.related, knobs.related, 1.0)
        return w * np.where(self.sibling & ~self.related, knobs.sibling, 1.0)


def _likeness(
    rows: Sequence[Features], columns: Sequence[Features], scale: np.ndarray
) -> _Likeness:
    cats = [np.array([f.categories[i] for f in columns]) for i in range(len(CATEGORIES))]
    differ = np.array([sum(c != f.categories[i] for i, c in enumerate(cats)) for f in rows])
    sizes = np.array([f.sizes for f in columns]) / scale
    mine = np.array([f.sizes for f in rows]) / scale
    distance = ((mine[:, None, :] - sizes[None, :, :]) ** 2).sum(axis=2)
    related = np.array([[_related(r, c) for c in columns] for r in rows], dtype=bool)
    sibling = np.array([[bool(r.chunks & c.chunks) for c in columns] for r in rows], dtype=bool)
    return _Likeness(differ, distance, related, sibling)


def _related(one: Features, other: Features) -> bool:
    """In each other's lineage, or both in a third task's (variants of one root)."""
    return (
        one.task_id in other.relatives
        or other.task_id in one.relatives
        or bool(one.relatives & other.relatives)
    )


def _likelihoods(history: Sequence[Earlier]) -> np.ndarray:
    """[earlier task, grid]: the probability of its passes and failures at each pass rate."""
    n = np.array([[e.attempts] for e in history], dtype=float)
    s = np.array([[e.passes] for e in history], dtype=float)
    return GRID[None, :] ** s * (1 - GRID[None, :]) ** (n - s)


def spread(size: int, most: int) -> np.ndarray:
    """Evenly spread indices, at most `most` of them (the same every time)."""
    return np.unique(np.linspace(0, size - 1, min(size, most)).round().astype(int))
