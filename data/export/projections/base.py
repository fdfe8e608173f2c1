"""What a trainer projection declares, and what every projection reads: the version's tasks as
its manifest lists them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from data.export.splits import SPLITS, TRAIN, Row, split_file
from data.export.versions import read_tasks
from data.lake import Lake

if TYPE_CHECKING:
    from data.export.verifiers_package import Graders


@dataclass(frozen=True)
class Inputs:
    """What a projection may read besides the version: the lake (the SFT rollouts) and how the
    verifiers package grades each verifier type (`judges.verifier_types.package_graders()`)."""

    lake: Lake
    graders: Graders


# a projection's writer: into the folder `out`, from the version folder and its tasks, -> (rows
# written, rows left out by reason)
Writer = Callable[[Path, Path, list[Row], Inputs], tuple[int, dict[str, int]]]


@dataclass(frozen=True)
class Projector:
    """One trainer projection: its name (`vNNNN/<name>/`, `foundry export --format <name>`),
    what it is for (the CLI's help), and its writer."""

    name: str
    help: str
    write: Writer


def canonical_rows(version: Path) -> list[dict[str, Any]]:
    """The tasks of a taskset version, both splits, in task order."""
    return read_tasks(version).to_pylist()


def last_user_message(messages: list[dict[str, str]]) -> str:
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


def write_rows(out: Path, rows: list[Row], schema: pa.Schema, splits: list[str]) -> int:
    """`rows` (each of the split at the same place in `splits`) into one parquet file per
    split, `<split>.parquet` in `out`: no training file holds an eval task. The train file is
    always written; a split without rows has no file (`datasets` refuses an empty one)."""
    for split in SPLITS:
        kept = [row for row, side in zip(rows, splits, strict=True) if side == split]
        if kept or split == TRAIN:
            pq.write_table(pa.Table.from_pylist(kept, schema=schema), out / split_file(split))
    return len(rows)
