"""The catalog at scale: exporting a million tasks and the funnel over them.

A synthetic lake of `--rows` calibrated document tasks (tasks, their verify, review and
calibrate statuses, their difficulty rows) is written straight as parquet shards with the lake's
own schemas, `--shard-rows` rows per shard, as runs would leave them. Then it times, each with
the process's peak resident memory after it:

- **export**: `data.export.export_taskset`, the whole taskset to parquet (the query joining
  tasks, difficulty, reviews and statuses; one row per repair family);
- **funnel**: `data.funnel.funnel`, the per-stage counts and reasons `foundry stats` shows;
- **scan**: a bare `count(*)` over the tasks view, the floor for any query over the lake.

Run from the repository root: `.venv/bin/python bench/catalog.py [--rows 1000000]`.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.export import export_taskset  # noqa: E402
from data.funnel import funnel  # noqa: E402
from data.lake import TABLES, Lake  # noqa: E402

NOW = datetime(2026, 11, 30, tzinfo=UTC)
BANDS = ("too_easy", "in_band", "too_hard")


def task_rows(start: int, stop: int) -> dict[str, list]:
    ids = [f"{i:016x}" for i in range(start, stop)]
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
            json.dumps([{"source_id": "s", "path": "doc.md", "chunk_id": f"c{i}"}]) for i in ids
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
        "temperature": [0.8] * len(ids),
        "max_tokens": [48] * len(ids),
    }


def status_rows(ids: list[str]) -> dict[str, list]:
    stages = [("verify", "accepted", ""), ("review", "reviewed", ""),
              ("calibrate", "in_band", "solver|closed_book")]  # fmt: skip
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


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shard-rows", type=int, default=50_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        lake = Lake(Path(home))
        started = time.perf_counter()
        for start in range(0, args.rows, args.shard_rows):
            stop = min(args.rows, start + args.shard_rows)
            tasks = task_rows(start, stop)
            write_shard(lake, "tasks", tasks)
            write_shard(lake, "difficulty", difficulty_rows(tasks["task_id"]))
            write_shard(lake, "status", status_rows(tasks["task_id"]))
        built = time.perf_counter() - started
        print(f"{args.rows:,} tasks in {args.rows // args.shard_rows} shards per table")
        print(f"{'phase':<8} {'seconds':>8} {'rows/s':>10} {'peak MB':>8}")
        print(f"{'build':<8} {built:>8.1f} {args.rows / built:>10,.0f} {peak_mb():>8,.0f}")
        phases = {
            "scan": lambda: lake.rows("SELECT count(*) AS n FROM tasks")[0]["n"],
            "funnel": lambda: funnel(lake)["stages"]["calibrate"]["done"],
            "export": lambda: export_taskset(lake, "bench", Path(home) / "tasksets").n_tasks,
        }
        for name, run in phases.items():
            started = time.perf_counter()
            rows = run()
            seconds = time.perf_counter() - started
            if rows != args.rows:
                raise SystemExit(f"{name}: {rows} rows, expected {args.rows}")
            print(f"{name:<8} {seconds:>8.1f} {rows / seconds:>10,.0f} {peak_mb():>8,.0f}")


if __name__ == "__main__":
    main()
