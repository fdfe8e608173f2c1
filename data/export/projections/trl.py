"""TRL's prompt-only conversational shape (`prompt` as chat messages) plus the columns the
reward functions in `judges.rewards` read (`solution`, `verifier`, `kind`, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from data.export.projections.base import Inputs, Projector, Row, write_rows
from data.export.taskset import MESSAGE

TRL_SCHEMA = pa.schema(
    [
        ("prompt", pa.list_(MESSAGE)),
        ("solution", pa.string()),
        ("verifier", pa.string()),
        ("kind", pa.string()),
        ("task_id", pa.string()),
        ("workspace", pa.string()),
        ("environment", pa.string()),
        ("world", pa.string()),
        ("tools", pa.string()),
        ("pass_rate", pa.float64()),
        ("band", pa.string()),
        ("pool", pa.string()),
        ("harness", pa.string()),
        ("evidence", pa.string()),
        ("split", pa.string()),
    ]
)


def trl_row(task: dict[str, Any]) -> dict[str, Any]:
    """One TRL GRPO row: the prompt, and the columns the reward functions are passed."""
    return {
        "prompt": task["prompt"],
        "solution": task["answer"],
        "verifier": task["verifier"],
        "kind": task["kind"],
        "task_id": task["task_id"],
        "workspace": task["workspace"],
        "environment": task["environment"],
        "world": task.get("world"),
        "tools": task.get("tools"),
        "pass_rate": task["pass_rate"],
        "band": task["band"],
        "pool": task["pool"],
        "harness": task["harness"],  # the environment its pass rate was measured in
        "evidence": task["evidence"],  # grader-side, like `solution`: what a gold episode reads
        "split": task.get("split"),  # `train.parquet` holds the train split only
    }


def _write(out: Path, version: Path, tasks: list[Row], inputs: Inputs) -> tuple[int, dict]:
    rows = [trl_row(t) for t in tasks]
    return write_rows(out, rows, TRL_SCHEMA, [t["split"] for t in tasks]), {}


PROJECTION = Projector("trl", "GRPOTrainer's rows and reward columns", _write)
