"""The export streams: rows go from the lake into parquet parts a batch at a time, in task order,
and the manifest and fingerprint built along the way equal those of the whole taskset."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from data.export import export_taskset
from data.export import taskset as export
from data.lake import Lake
from families import export_kinds
from sources import groupings
from tests.fakes.synthetic_lake import write_calibrated_tasks

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_rows_stream_into_parts_in_order_and_a_same_export_writes_nothing(tmp_path, monkeypatch):
    lake = Lake(tmp_path / "home")
    ids = write_calibrated_tasks(lake, 0, 1_300) + write_calibrated_tasks(lake, 1_300, 2_500)
    monkeypatch.setattr(export, "ROWS_PER_BATCH", 700)  # batches that straddle the parts

    first = export_taskset(
        lake,
        "synthetic",
        tmp_path / "out",
        rows_per_part=1_000,
        kinds=export_kinds(),
        groupings=groupings(),
    )

    manifest = json.loads((first.path / "manifest.json").read_text())
    stamp = manifest["fingerprint"]
    assert manifest["split"]["files"] == {
        "train": [f"data/train-{stamp}-0000{i}.parquet" for i in range(3)],
        "eval": [],  # a split without tasks has no file: `datasets` refuses an empty one
    }
    assert manifest["files"] == manifest["split"]["files"]["train"]
    parts = [pq.read_table(first.path / name) for name in manifest["files"]]
    assert [part.num_rows for part in parts] == [1_000, 1_000, 500]
    assert [i for part in parts for i in part.column("task_id").to_pylist()] == sorted(ids)
    assert manifest["n_tasks"] == sum(manifest["difficulty_histogram"]) == 2_500
    assert manifest["by_band"] == {"too_easy": 834, "in_band": 833, "too_hard": 833}
    assert manifest["models"]["solver"] == ["solver"]

    again = export_taskset(
        lake,
        "synthetic",
        tmp_path / "out",
        rows_per_part=1_000,
        kinds=export_kinds(),
        groupings=groupings(),
    )
    assert not again.written and again.path == first.path
    assert sorted(p.name for p in (tmp_path / "out" / "synthetic").iterdir()) == [
        "latest",
        "v0001",
    ]  # the identical export's parts, written aside, are gone


# Measured in a process of its own: tracemalloc counts every thread's allocations, and a test
# worker that ran other files first holds their threads (23 MiB were counted on CI, 8 MiB alone).
EXPORT_PEAK_SCRIPT = """
import json, sys, tracemalloc
from pathlib import Path
from data.export import taskset as export
from data.lake.store import Lake
from families import export_kinds
from sources import groupings
from tests.fakes.synthetic_lake import write_calibrated_tasks

home, out, n_tasks = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
lake = Lake(home)
for start in range(0, n_tasks, 5_000):
    write_calibrated_tasks(lake, start, min(start + 5_000, n_tasks))
export.ROWS_PER_BATCH = 1_000
tracemalloc.start()
result = export.export_taskset(lake, "synthetic", out, kinds=export_kinds(), groupings=groupings())
_, peak = tracemalloc.get_traced_memory()
print(json.dumps({"n_tasks": result.n_tasks, "peak": peak}))
"""


def export_peak(tmp_path: Path, n_tasks: int) -> int:
    """The peak of Python objects the export of `n_tasks` synthetic tasks allocates, in a fresh
    interpreter that runs nothing else."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            EXPORT_PEAK_SCRIPT,
            str(tmp_path / "home"),
            str(tmp_path / "out"),
            str(n_tasks),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(done.stdout.splitlines()[-1])
    assert measured["n_tasks"] == n_tasks
    return measured["peak"]


def test_export_memory_does_not_grow_with_the_taskset(tmp_path):
    peak = export_peak(tmp_path, 20_000)
    # 1,000 rows as Python objects at a time: 4.6 MiB; holding all 20,000 took 81 MiB
    assert peak < 12 * 2**20, f"peak {peak / 2**20:.1f} MiB of Python objects"


def test_an_empty_taskset_has_one_empty_part(tmp_path):
    result = export_taskset(
        Lake(tmp_path / "home"),
        "empty",
        tmp_path / "out",
        kinds=export_kinds(),
        groupings=groupings(),
    )
    manifest = json.loads((result.path / "manifest.json").read_text())
    assert result.n_tasks == 0
    assert manifest["files"] == [f"data/train-{manifest['fingerprint']}-00000.parquet"]
    assert pq.read_table(result.path / manifest["files"][0]).num_rows == 0
