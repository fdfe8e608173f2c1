"""The curation page at scale: its queue pages, filters and task records over many tasks.

A synthetic lake (`tests.fakes.synthetic_lake`) of `--rows` calibrated document tasks is
written as parquet shards with the lake's own schemas, and a share of them given reviewers'
decisions. Then each request the page makes is timed (median of `--repeat`), beside the floor
any lake query pays, a bare `count(*)` over the tasks view, with their ratio:

- **first page**, **last page**: 50 tasks of the queue (unreviewed first), at the start and
  at the end (the page's offset);
- **filtered**: the first page of one band's unreviewed tasks;
- **task**: one task's whole record (`data.lake.curation.task_record`);
- **decide**: one decision appended (`data.lake.curation.decide`).

Run from the repository root: `.venv/bin/python bench/curation_queue.py [--rows 100000]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.lake import (  # noqa: E402
    Lake,  # noqa: E402
    QueueFilter,
    decide,
    queue,
    task_record,
)
from tests.fakes.synthetic_lake import write_calibrated_tasks  # noqa: E402


def median_ms(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--shard-rows", type=int, default=50_000)
    parser.add_argument("--decided", type=int, default=1_000, help="tasks given a decision")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        lake = Lake(Path(home))
        ids: list[str] = []
        for start in range(0, args.rows, args.shard_rows):
            ids += write_calibrated_tasks(lake, start, min(args.rows, start + args.shard_rows))
        for n, task_id in enumerate(ids[: args.decided]):
            decide(lake, task_id, "accept" if n % 2 else "reject", "bench", reason="trivial")
        total = queue(lake, QueueFilter(), 0, 50)["total"]
        if total != args.rows:
            raise SystemExit(f"the queue holds {total} tasks, expected {args.rows}")
        floor = median_ms(lambda: lake.rows("SELECT count(*) AS n FROM tasks"), args.repeat)
        band = queue(lake, QueueFilter(), 0, 1)["bands"][0]
        requests = {
            "first page": lambda: queue(lake, QueueFilter(), 0, 50),
            "last page": lambda: queue(lake, QueueFilter(), args.rows - 50, 50),
            "filtered": lambda: queue(lake, QueueFilter(band=band, state="unreviewed"), 0, 50),
            "task": lambda: task_record(lake, ids[len(ids) // 2]),
            "decide": lambda: decide(lake, ids[-1], "accept", "bench"),
        }
        print(f"{args.rows:,} calibrated tasks, {args.decided:,} decided; median of {args.repeat}")
        print(f"{'request':<12} {'ms':>8} {'x count(*)':>10}")
        print(f"{'count(*)':<12} {floor:>8.1f} {1.0:>10.1f}")
        for name, run in requests.items():
            ms = median_ms(run, args.repeat)
            print(f"{name:<12} {ms:>8.1f} {ms / floor:>10.1f}")


if __name__ == "__main__":
    main()
