"""Judge variance: open-book verdicts re-asked with other seeds (a measurement, not a stage;
`foundry judges variance`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from data.lake import (
    Task,
    VerdictRerun,
)
from data.llm import Endpoint
from families.documents import evidence_passages
from families.stage import (
    StageContext,
    load_tasks,
)
from judges import answerability
from judges.variance import reask


@dataclass(frozen=True)
class VarianceSample:
    tasks: list[tuple[Task, str]]  # (task, passage)
    original: dict[tuple[str, str], str]  # (task_id, judge) -> first open-book decision


def variance_sample(ctx: StageContext, tasks: int) -> VarianceSample:
    """Up to `tasks` tasks with open-book verdicts under the current prompt."""
    rows = ctx.lake.rows(
        "SELECT task_id, judge, decision FROM verdicts"
        " WHERE \"check\" = 'open_book' AND prompt_version = ?",
        [answerability.OPEN_BOOK.version],
    )
    original = {(r["task_id"], r["judge"]): r["decision"] for r in rows}
    sample = sorted({task_id for task_id, _ in original})[:tasks]  # ids are hashes: unbiased
    loaded = load_tasks(ctx, sample)
    passages = evidence_passages(ctx, loaded.values())
    return VarianceSample([(t, passages[i]) for i, t in loaded.items() if passages[i]], original)


def measure_variance(
    ctx: StageContext,
    endpoints: dict[str, Endpoint],
    sample: VarianceSample,
    seeds: int,
    temperature: float | None,
) -> list[VerdictRerun]:
    """Re-ask the sample's open-book verdicts with `seeds` other seeds; store the reruns."""
    reruns, calls = asyncio.run(
        reask(
            sample.tasks,
            sample.original,
            endpoints,
            ctx.cache,
            ctx.run_id,
            seeds,
            temperature,
        )
    )
    ctx.lake.write("verdict_reruns", reruns, ctx.run_id)
    ctx.lake.write("llm_calls", calls, ctx.run_id)
    return reruns
