"""The `evaluate` flow: policies' pass rates on a held-out split of a taskset, side by side.

Each policy attempts every task of the split k times in the task's own environment (the
harness calibration used: open book, document search, code in the sandbox, a world's tools),
graded by its family's verifier. Results go to the lake (the `evaluations` table; per task, the
`difficulty` rows and attempts of the evaluation's stage), so a re-run resumes where it stopped
and `foundry stats` and the report page show them; the table is also a Prefect artifact.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from data.export import taskset_version
from data.llm import Policy, parse_policy, serving, with_policy
from families.stage import StageContext
from flows.pipeline import run_llm_stages, stage_context
from flows.stages import evaluation, evaluation_stage_name
from judges.evaluation import (
    Difference,
    evaluation_record,
    paired_difference,
    split_task_ids,
    table_lines,
    task_results,
)

DEFAULT_ATTEMPTS = 4
ARTIFACT_KEY = "foundry-evaluation"


@flow(name="evaluate")
def evaluate_flow(
    taskset: str,
    policies: list[str],
    split: str = "eval",
    attempts: int = DEFAULT_ATTEMPTS,
    limit: int | None = None,
    home: str | None = None,
    config: str | None = None,
) -> dict[str, Any]:
    """Pass rate of each of `policies` (`embedded`, a model folder, `MODEL@URL` or a model on
    the solver's server) on `split` of the taskset at `taskset`, `attempts` per task, with
    Wilson intervals; with two or more, each later one's per-task difference from the first,
    with a bootstrap interval over tasks. `limit`: the split's first tasks by id only."""
    if attempts < 1 or (limit is not None and limit < 1):
        raise ValueError("attempts and limit must be at least 1")
    with stage_context("evaluate", home, config) as ctx:
        version = taskset_version(Path(taskset))
        name = f"{version.parent.name}/{version.name}"
        task_ids = split_task_ids(version, split)[:limit]
        confidence = ctx.config.calibrate.confidence
        evaluations, results = [], []
        for spec in policies:
            policy = parse_policy(spec)
            stage = evaluation_stage_name(policy.label, attempts)
            ctx.progress(f"evaluate {policy.label} on {len(task_ids)} {split} tasks of {name}")
            with as_solver(ctx, policy):
                run_llm_stages([evaluation(stage, task_ids)], ctx)
            measured = task_results(ctx.lake, stage, task_ids)
            size = len(task_ids)
            record = evaluation_record(
                name, split, policy.label, spec, stage, attempts, size, measured, confidence
            )
            ctx.lake.write("evaluations", [record], ctx.run_id)
            evaluations.append(record)
            results.append(measured)
        differences = [paired_difference(results[0], later, confidence) for later in results[1:]]
        table = table_lines(evaluations, differences)
        create_markdown_artifact(
            f"### {name}, split `{split}`: pass rate per policy\n\n```\n{table}\n```\n",
            key=ARTIFACT_KEY,
            description="Policies' held-out pass rates and their differences from the first",
        )
        return {
            "taskset": name,
            "split": split,
            "tasks": len(task_ids),
            "table": table,
            "evaluations": [e.model_dump(mode="json") for e in evaluations],
            "differences": [_difference(d) for d in differences],
        }


@contextmanager
def as_solver(ctx: StageContext, policy: Policy) -> Iterator[Policy]:
    """`policy` served (a model folder on loopback) and in the solver's role for as long as
    this lasts."""
    configured = ctx.config
    with serving(policy, configured.home / "cache", configured.home / "logs") as ready:
        ctx.config = configured.model_copy(update={"roles": with_policy(configured.roles, ready)})
        try:
            yield ready
        finally:
            ctx.config = configured


def _difference(difference: Difference | None) -> dict[str, Any] | None:
    return None if difference is None else asdict(difference)
