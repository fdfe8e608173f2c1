"""The verifiers library's classic shape (`example_id`, `prompt`, `question`, `answer`, `info` as
JSON, `task`) and a verifiers v1 taskset package (`data.export.verifiers_package`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from data.export.projections.base import Inputs, Projector, Row, last_user_message, write_rows
from data.export.taskset import MESSAGE
from data.export.verifiers_package import write_package

VERIFIERS_SCHEMA = pa.schema(
    [
        ("example_id", pa.int64()),
        ("prompt", pa.list_(MESSAGE)),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("info", pa.string()),
        ("task", pa.string()),
    ]
)


def verifiers_row(index: int, task: dict[str, Any]) -> dict[str, Any]:
    """One row of the verifiers classic shape; `info` holds what scoring needs, as JSON."""
    info = {
        "task_id": task["task_id"],
        "kind": task["kind"],
        "verifier": json.loads(task["verifier"]),
        "workspace": json.loads(task["workspace"]) if task["workspace"] else None,
        "environment": json.loads(task["environment"]) if task["environment"] else None,
        "world": json.loads(task["world"]) if task.get("world") else None,
        "pass_rate": task["pass_rate"],
        "band": task["band"],
        "pool": task["pool"],
        "intent": task["intent"],
        "split": task.get("split"),
    }
    return {
        "example_id": index,
        "prompt": task["prompt"],
        "question": last_user_message(task["prompt"]),
        "answer": task["answer"],
        "info": json.dumps(info, sort_keys=True, ensure_ascii=False),
        "task": task["kind"],
    }


def _write(out: Path, version: Path, tasks: list[Row], inputs: Inputs) -> tuple[int, dict]:
    rows = [verifiers_row(i, t) for i, t in enumerate(tasks)]
    write_rows(out, rows, VERIFIERS_SCHEMA, [t["split"] for t in tasks])
    left_out = write_package(out / "taskset", version, tasks, inputs.graders)
    return len(rows), {f"from_v1_package:{reason}": n for reason, n in left_out.items()}


PROJECTION = Projector("verifiers", "classic columns + v1 taskset package", _write)
