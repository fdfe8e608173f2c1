"""What a trainer projection declares, and what every projection reads: the version's tasks as
its manifest lists them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from data.lake import Lake

if TYPE_CHECKING:
    from data.verifiers_package import Graders

PART = "part-00000.parquet"
Row = dict[str, Any]


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
    """The tasks of a taskset version, as its manifest lists its parquet parts."""
    manifest = json.loads((version / "manifest.json").read_text())
    tables = [pq.read_table(version / part) for part in manifest["files"]]
    return pa.concat_tables(tables).to_pylist() if tables else []


def last_user_message(messages: list[dict[str, str]]) -> str:
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


def write_rows(out: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> tuple[int, dict]:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / PART)
    return len(rows), {}
