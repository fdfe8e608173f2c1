"""A synthetic lake of calibrated document tasks, written straight as parquet shards with the
lake's own schemas, as runs would leave them: tasks, their verify, review and calibrate
statuses, and their difficulty rows. For the catalog benchmark and the export tests."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq

from data.lake import TABLES, Lake

NOW = datetime(2026, 11, 30, tzinfo=UTC)
Documents = Callable[[int], list[str]]
BANDS = ("too_easy", "in_band", "too_hard")


def task_rows(start: int, stop: int, documents: Documents | None = None) -> dict[str, list]:
    ids = [f"{i:016x}" for i in range(start, stop)]
    documents = documents or (lambda number: ["s"])
    verifier = json.dumps({"type": "exact_or_f1", "f1_threshold": 0.6})
    lineage = json.dumps(
        {
            "generator": "doc_qa",
            "generator_version": "2",
            "prompt_hash": "p",
            "model": "m",
            "seed": "s",
            "knobs": {"level": "base"},
        }  # fmt: skip
    )
    return {
        "task_id": ids,
        "kind": ["doc_qa"] * len(ids),
        "prompt": [[{"role": "user", "content": f"Fill the blank: fact {i} is ___."}] for i in ids],
        "answer": [f"answer {i}" for i in ids],
        "verifier": [verifier] * len(ids),
        "evidence": [json.dumps([{"chunk_id": f"c{i}", "quote": f"fact {i}"}]) for i in ids],
        "source": [
            json.dumps(
                [
                    {"source_id": doc, "path": f"{doc}.md", "chunk_id": f"c{i}"}
                    for doc in documents(int(i, 16))
                ]
            )
            for i in ids
        ],
        "lineage": [lineage] * len(ids),
        "schema_version": ["1"] * len(ids),
        "workspace": [None] * len(ids),
        "environment": [None] * len(ids),
        "world": [None] * len(ids),
    }


def difficulty_rows(ids: list[str]) -> dict[str, list]:
    rates = [(int(i, 16) % 9) / 8 for i in ids]
    return {
        "task_id": ids,
        "solver_model": ["solver"] * len(ids),
        "harness": ["closed_book"] * len(ids),
        "stage": ["calibrate"] * len(ids),
        "n": [8] * len(ids),
        "passes": [round(r * 8) for r in rates],
        "pass_rate": rates,
        "pass_at_k": [1.0 if r else 0.0 for r in rates],
        "ci_low": [max(0.0, r - 0.2) for r in rates],
        "ci_high": [min(1.0, r + 0.2) for r in rates],
        "confidence": [0.9] * len(ids),
        "band": [BANDS[int(i, 16) % 3] for i in ids],
        "pool": ["normal"] * len(ids),
        "learnability": [4 * r * (1 - r) for r in rates],
        "method": ["fixed"] * len(ids),
        "prior": [""] * len(ids),
        "prior_mean": [None] * len(ids),
        "prior_alike": [None] * len(ids),
        "temperature": [0.8] * len(ids),
        "max_tokens": [48] * len(ids),
    }


def status_rows(ids: list[str]) -> dict[str, list]:
    stages = [("verify", "accepted", ""), ("review", "reviewed", ""),
              ("calibrate", "in_band", "4 of 8 passed in closed_book")]  # fmt: skip
    rows: dict[str, list] = {k: [] for k in ("stage", "item_id", "status", "reason", "detail")}
    for stage, reason, detail in stages:
        rows["stage"] += [stage] * len(ids)
        rows["item_id"] += ids
        rows["status"] += ["done"] * len(ids)
        rows["reason"] += [reason] * len(ids)
        rows["detail"] += [detail] * len(ids)
    rows["run_id"] = ["bench"] * len(rows["stage"])
    rows["recorded_at"] = [NOW] * len(rows["stage"])
    return rows


def write_shard(lake: Lake, table: str, columns: dict[str, list]) -> None:
    schema = TABLES[table].record.arrow_schema()
    folder = lake.root / table
    folder.mkdir(parents=True, exist_ok=True)
    arrow = pa.Table.from_pydict({f.name: columns[f.name] for f in schema}, schema=schema)
    pq.write_table(arrow, folder / f"20261130T000000-bench-{uuid.uuid4().hex[:8]}.parquet")


def write_calibrated_tasks(
    lake: Lake, start: int, stop: int, documents: Documents | None = None
) -> list[str]:
    """Tasks `start` to `stop` (ids are their numbers in hex), one shard per table; their ids.
    `documents` names the source documents of task number i (default: all one, `s`)."""
    tasks = task_rows(start, stop, documents)
    write_shard(lake, "tasks", tasks)
    write_shard(lake, "difficulty", difficulty_rows(tasks["task_id"]))
    write_shard(lake, "status", status_rows(tasks["task_id"]))
    return tasks["task_id"]
