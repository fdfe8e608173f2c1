"""The parts of a taskset version as they are written: rows into one series of parquet files
per split, and the fingerprint of the rows, fed as they stream past."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from data.export.splits import SPLITS, TRAIN

DATA_FOLDER = "data"  # the version's parquet parts, `<split>-<fingerprint>-NNNNN.parquet`


class SplitParts:
    """Rows into `data/<split>-NNNNN.parquet` files, at most `rows_per_part` rows each, one
    series per split, the layout the Hub and `datasets` read as splits. A split without tasks
    has no file (`datasets` refuses an empty one); an empty taskset has one empty train part,
    so every version has its data folder."""

    def __init__(self, folder: Path, rows_per_part: int, schema: pa.Schema) -> None:
        (folder / DATA_FOLDER).mkdir()
        self.folder = folder
        self.rows_per_part = rows_per_part
        self.schema = schema
        self.names: dict[str, list[str]] = {split: [] for split in SPLITS}
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._rows_in_part: dict[str, int] = {}

    def __enter__(self) -> SplitParts:
        return self

    def write(self, rows: list[dict[str, Any]]) -> None:
        for split in SPLITS:
            table = pa.Table.from_pylist([r for r in rows if r["split"] == split], self.schema)
            self._write(split, table)

    def files(self) -> list[str]:
        """Every part, split by split."""
        return [name for split in SPLITS for name in self.names[split]]

    def stamp(self, fingerprint: str) -> None:
        """Put the version's fingerprint in its parts' names (`data/<split>-<fingerprint>-NNNNN
        .parquet`), once written: `datasets` caches a folder's splits by its name and the card's
        file patterns, so two versions named alike (every taskset's `v0001`) would otherwise
        load each other's rows."""
        for split, names in self.names.items():
            stamped = [name.replace(f"/{split}-", f"/{split}-{fingerprint}-", 1) for name in names]
            for old, new in zip(names, stamped, strict=True):
                os.replace(self.folder / old, self.folder / new)
            self.names[split] = stamped

    def _write(self, split: str, table: pa.Table) -> None:
        while table.num_rows:
            if split not in self._writers:
                self._open(split)
            room = self.rows_per_part - self._rows_in_part[split]
            self._writers[split].write_table(table.slice(0, room))
            self._rows_in_part[split] += min(room, table.num_rows)
            table = table.slice(room)
            if self._rows_in_part[split] == self.rows_per_part:
                self._writers.pop(split).close()

    def __exit__(self, *exc_info: object) -> None:
        if exc_info[0] is None and not self.files():
            self._open(TRAIN)
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def _open(self, split: str) -> None:
        name = f"{DATA_FOLDER}/{split}-{len(self.names[split]):05d}.parquet"
        self.names[split].append(name)
        self._writers[split] = pq.ParquetWriter(self.folder / name, self.schema)
        self._rows_in_part[split] = 0


class Fingerprint:
    """The first 16 hex digits of the sha256 of `json.dumps([rows, band], sort_keys=True,
    default=str)`, fed one row at a time: the same text, never held whole."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256(b"[[")
        self._rows = 0

    def add(self, row: dict[str, Any]) -> None:
        if self._rows:
            self._hash.update(b", ")
        self._hash.update(json.dumps(row, sort_keys=True, default=str).encode("utf-8"))
        self._rows += 1

    def hexdigest(self, band: tuple[float, float] | None) -> str:
        tail = "], " + json.dumps(band, sort_keys=True, default=str) + "]"
        self._hash.update(tail.encode("utf-8"))
        return self._hash.hexdigest()[:16]
