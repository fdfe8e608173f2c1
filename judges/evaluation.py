"""Held-out evaluation: a policy's pass rate on a split, and the difference between two.

A policy's pass rate pools its attempts (k per task, so every task weighs the same) with a
Wilson interval over them. Attempts on one task are not independent, so the difference
between two policies is taken task by task: the mean over the tasks both were measured on of
(after - before) per-task pass rate, with a percentile bootstrap interval that resamples tasks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data.export import read_tasks
from data.lake import Evaluation, Lake, content_id, utcnow
from judges.passrate import wilson_interval

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0  # the interval of the same data is the same every time


def split_task_ids(version: Path, split: str) -> list[str]:
    """The task ids of `split` in taskset version folder `version`, in task order."""
    manifest = json.loads((version / "manifest.json").read_text())
    if "split" not in manifest:
        raise ValueError(
            f"{version} was exported before tasksets had splits: export it again"
            " (`foundry export`) to evaluate it on a held-out split"
        )
    return read_tasks(version, split).column("task_id").to_pylist()


def task_results(lake: Lake, stage: str, task_ids: Sequence[str]) -> list[dict]:
    """Each of `task_ids` that `stage` measured: task_id, kind, n (attempts) and passes."""
    return lake.rows(
        "SELECT d.task_id, t.kind, d.n, d.passes FROM difficulty d JOIN tasks t USING (task_id)"
        " WHERE d.stage = ? AND list_contains(?, d.task_id) ORDER BY d.task_id",
        [stage, list(task_ids)],
    )


def evaluation_record(
    taskset: str,
    split: str,
    policy: str,
    policy_spec: str,
    stage: str,
    k: int,
    split_size: int,
    results: list[dict],
    confidence: float,
) -> Evaluation:
    """The summary of one policy's `results` (from `task_results`) on a split of
    `split_size` tasks."""
    attempts = sum(r["n"] for r in results)
    passes = sum(r["passes"] for r in results)
    by_kind: dict[str, list[int]] = {}
    for r in results:
        tally = by_kind.setdefault(r["kind"], [0, 0])
        tally[0] += r["n"]
        tally[1] += r["passes"]
    low, high = wilson_interval(passes, attempts, confidence) if attempts else (0.0, 1.0)
    return Evaluation(
        evaluation_id=content_id(taskset, split, stage),
        taskset=taskset,
        split=split,
        policy=policy,
        policy_spec=policy_spec,
        stage=stage,
        k=k,
        tasks=len(results),
        missing=split_size - len(results),
        attempts=attempts,
        passes=passes,
        pass_rate=passes / attempts if attempts else 0.0,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        by_kind=dict(sorted(by_kind.items())),
        recorded_at=utcnow(),
    )


@dataclass(frozen=True)
class Difference:
    """After minus before, in per-task pass rate, over the tasks both were measured on."""

    tasks: int
    mean: float
    low: float
    high: float
    confidence: float
    improved: int  # tasks whose pass rate went up
    worsened: int


def paired_difference(
    before: list[dict], after: list[dict], confidence: float, resamples: int = BOOTSTRAP_RESAMPLES
) -> Difference | None:
    """The per-task difference of two policies' `task_results` (None: no task in common),
    with a percentile bootstrap interval over tasks."""
    rate_before = {r["task_id"]: r["passes"] / r["n"] for r in before if r["n"]}
    rate_after = {r["task_id"]: r["passes"] / r["n"] for r in after if r["n"]}
    common = sorted(rate_before.keys() & rate_after.keys())
    if not common:
        return None
    deltas = np.array([rate_after[t] - rate_before[t] for t in common])
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = deltas[rng.integers(0, len(deltas), size=(resamples, len(deltas)))].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Difference(
        tasks=len(common),
        mean=float(deltas.mean()),
        low=float(low),
        high=float(high),
        confidence=confidence,
        improved=int((deltas > 0).sum()),
        worsened=int((deltas < 0).sum()),
    )


def table_lines(evaluations: Sequence[Evaluation], differences: Sequence[Difference | None]) -> str:
    """A text table: one line per evaluation, the first the baseline; each later one with its
    difference from the baseline (`differences[i]` for `evaluations[i + 1]`)."""
    lines = [
        f"{'policy':<40} {'tasks':>5} {'k':>3} {'pass rate':>9}  interval        vs first",
    ]
    for i, ev in enumerate(evaluations):
        interval = f"[{ev.ci_low:.3f}, {ev.ci_high:.3f}]"
        delta = "baseline" if i == 0 else _difference_text(differences[i - 1])
        figures = f"{ev.tasks:>5} {ev.k:>3} {ev.pass_rate:>9.3f}  {interval:<15}"
        lines.append(f"{ev.policy[:40]:<40} {figures} {delta}")
    return "\n".join(lines)


def _difference_text(difference: Difference | None) -> str:
    if difference is None:
        return "no task in common"
    return (
        f"{difference.mean:+.3f} [{difference.low:+.3f}, {difference.high:+.3f}]"
        f" over {difference.tasks} tasks (up {difference.improved}, down {difference.worsened})"
    )
