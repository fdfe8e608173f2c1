"""The catalog at scale: exporting a million tasks and the funnel over them.

A synthetic lake (`tests.fakes.synthetic_lake`) of `--rows` calibrated document tasks (tasks,
their verify, review and calibrate statuses, their difficulty rows) is written straight as
parquet shards with the lake's own schemas, `--shard-rows` rows per shard, as runs would leave
them. Then it times, each with the process's peak resident memory after it:

- **export**: `data.export.taskset.export_taskset`, the whole taskset to parquet (the query joining
  tasks, difficulty, reviews and statuses; one row per repair family), streamed in batches;
- **funnel**: `data.lake.stage_funnel.funnel`, the per-stage counts and reasons `foundry stats`
  shows;
- **scan**: a bare `count(*)` over the tasks view, the floor for any query over the lake.

Run from the repository root: `.venv/bin/python bench/catalog.py [--rows 1000000]`.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.export import export_taskset  # noqa: E402
from data.lake import Lake, funnel  # noqa: E402
from families import export_kinds  # noqa: E402
from tests.fakes.synthetic_lake import write_calibrated_tasks  # noqa: E402


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
            write_calibrated_tasks(lake, start, min(args.rows, start + args.shard_rows))
        built = time.perf_counter() - started
        print(f"{args.rows:,} tasks in {args.rows // args.shard_rows} shards per table")
        print(f"{'phase':<8} {'seconds':>8} {'rows/s':>10} {'peak MB':>8}")
        print(f"{'build':<8} {built:>8.1f} {args.rows / built:>10,.0f} {peak_mb():>8,.0f}")
        phases = {
            "scan": lambda: lake.rows("SELECT count(*) AS n FROM tasks")[0]["n"],
            "funnel": lambda: funnel(lake)["stages"]["calibrate"]["done"],
            "export": lambda: (
                export_taskset(lake, "bench", Path(home) / "tasksets", kinds=export_kinds()).n_tasks
            ),
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
