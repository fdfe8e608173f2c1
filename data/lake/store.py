"""The lake: immutable parquet shards per table (the source of truth) and DuckDB over them.

Every write is one new shard, written to a hidden temporary file, fsynced and renamed into place,
so a crash never leaves a half-written shard visible. Reads deduplicate by each table's key
(latest shard wins), so re-processing an item after a crash never shows it twice. The persistent
`catalog.duckdb` holds the `runs` table and views over the shards for ad-hoc queries; it is
written only by the driver, briefly, so readers such as `foundry stats` never wait on a run.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from data.lake.records import (
    Attempt,
    Chunk,
    Commit,
    CommitReplay,
    Consensus,
    Decision,
    Difficulty,
    Evaluation,
    Gate,
    HackVerdict,
    Intent,
    JudgeControl,
    LLMCall,
    LoopRound,
    ProxyCall,
    Record,
    Repo,
    Review,
    RubricItem,
    Source,
    SplitAssignment,
    Status,
    Task,
    Trace,
    Verdict,
    VerdictRerun,
    WorldSource,
    utcnow,
)

CATALOG_OPEN_ATTEMPTS = 50
# Memory for one query over the lake before DuckDB spills to disk: a million-task export
# peaks at 1.3 GB of process memory with it, 3 GB without (bench/catalog.py).
QUERY_MEMORY_LIMIT = "1GB"
# Lake queries open a cursor (about 1 ms) on an in-memory DuckDB database kept for the process
# and spill folder last queried, rather than a new database (about 17 ms, 4 MB and 9 threads).
_query_database_held: tuple[tuple[int, str], duckdb.DuckDBPyConnection] | None = None
_query_database_lock = threading.Lock()


@dataclass(frozen=True)
class TableSpec:
    record: type[Record]
    key: tuple[str, ...]
    order: str  # which duplicate wins: the row with the greatest value of this expression


TABLES: dict[str, TableSpec] = {
    "sources": TableSpec(Source, ("source_id",), "_shard"),
    "chunks": TableSpec(Chunk, ("chunk_id",), "_shard"),
    "repos": TableSpec(Repo, ("repo_id",), "_shard"),
    "commits": TableSpec(Commit, ("repo_id", "sha"), "_shard"),
    "replays": TableSpec(CommitReplay, ("repo_id", "sha"), "_shard"),
    "tasks": TableSpec(Task, ("task_id",), "_shard"),
    "verdicts": TableSpec(Verdict, ("verdict_id",), "_shard"),
    "consensus": TableSpec(Consensus, ("task_id", "check"), "_shard"),
    "gates": TableSpec(Gate, ("task_id", "gate"), "_shard"),
    "verdict_reruns": TableSpec(VerdictRerun, ("rerun_id",), "_shard"),
    "attempts": TableSpec(Attempt, ("attempt_id",), "_shard"),
    "difficulty": TableSpec(Difficulty, ("task_id", "stage", "solver_model", "harness"), "_shard"),
    "rubrics": TableSpec(RubricItem, ("rubric_id",), "_shard"),
    "hack_verdicts": TableSpec(HackVerdict, ("verdict_id",), "_shard"),
    "reviews": TableSpec(Review, ("task_id",), "_shard"),
    "status": TableSpec(Status, ("stage", "item_id"), "recorded_at"),
    "llm_calls": TableSpec(LLMCall, ("call_id",), "_shard"),
    "proxy_calls": TableSpec(ProxyCall, ("call_id",), "_shard"),
    "traces": TableSpec(Trace, ("trace_id",), "_shard"),
    "intents": TableSpec(Intent, ("clustering_id", "cluster"), "_shard"),
    "worlds": TableSpec(WorldSource, ("world_id",), "_shard"),
    "splits": TableSpec(SplitAssignment, ("group_key",), "_shard"),
    "evaluations": TableSpec(Evaluation, ("evaluation_id",), "recorded_at"),
    "loop_rounds": TableSpec(LoopRound, ("round_id",), "recorded_at"),
    "judge_controls": TableSpec(JudgeControl, ("control_id",), "recorded_at"),
    "decisions": TableSpec(Decision, ("decision_id",), "decided_at"),
}


class Lake:
    """Parquet shards under `<home>/lake/<table>/` plus the DuckDB catalog."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.root = self.home / "lake"
        self.catalog_path = self.root / "catalog.duckdb"
        self.root.mkdir(parents=True, exist_ok=True)

    # --- writing ---------------------------------------------------------------------------

    def write(self, table: str, records: Sequence[Record], run_id: str = "") -> Path | None:
        """Append `records` to `table` as one atomic shard; returns its path (None if empty)."""
        if not records:
            return None
        spec = TABLES[table]
        bad = [r for r in records if not isinstance(r, spec.record)]
        if bad:
            raise TypeError(f"{table} takes {spec.record.__name__}, got {type(bad[0]).__name__}")
        arrow = pa.Table.from_pylist(
            [r.to_row() for r in records], schema=spec.record.arrow_schema()
        )
        folder = self.root / table
        folder.mkdir(parents=True, exist_ok=True)
        stamp = utcnow().strftime("%Y%m%dT%H%M%S%f")
        name = f"{stamp}-{run_id[:8] or 'norun'}-{uuid.uuid4().hex[:8]}.parquet"
        tmp = folder / f".{name}.tmp"
        with open(tmp, "wb") as handle:
            pq.write_table(arrow, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, folder / name)
        _fsync_dir(folder)
        return folder / name

    def compact(self, table: str, keep: Sequence[Record], run_id: str = "") -> int:
        """Rewrite `table` as one shard holding `keep`, deleting every shard before it; returns
        how many shards went. For rows that must not stay on disk (a trace scrubbed again
        under a new pattern). The new shard is in place before any old one is deleted, so a
        crash in between leaves the old rows readable, and the next compaction removes them."""
        old = self.shards(table)
        self.write(table, keep, run_id)
        for shard in old:
            shard.unlink()
        _fsync_dir(self.root / table)
        return len(old)

    # --- reading ---------------------------------------------------------------------------

    def shards(self, table: str) -> list[Path]:
        folder = self.root / table
        return sorted(folder.glob("*.parquet")) if folder.is_dir() else []

    @contextmanager
    def connect(self, tables: set[str] | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A DuckDB connection with a deduplicated view per lake table (or per table in
        `tables`), its own: the views are temporary, seen by no other connection. Queries share
        QUERY_MEMORY_LIMIT and spill past it to `lake/.spill`."""
        con = _query_database(self.root / ".spill").cursor()
        try:
            for table, spec in TABLES.items():
                if tables is not None and table not in tables:
                    continue
                files = self.shards(table)
                empty = pa.Table.from_pylist([], schema=spec.record.arrow_schema())
                if not files:
                    con.register(table, empty)
                    continue
                con.register(_typed_empty(table), empty)
                con.execute(f"CREATE TEMP VIEW {table} AS {_dedup_sql(files, table)}")
            yield con
        finally:
            con.close()

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Run a query over the lake views and return the rows as dicts."""
        with self.connect(_tables_in(sql)) as con:
            return con.sql(sql, params=list(params)).to_arrow_table().to_pylist()

    def batches(
        self, sql: str, params: Sequence[Any] = (), rows_per_batch: int = 10_000
    ) -> Iterator[list[dict[str, Any]]]:
        """Run a query over the lake views and yield its rows as dicts, `rows_per_batch` at a
        time: a result larger than memory streams through."""
        with self.connect(_tables_in(sql)) as con:
            reader = con.sql(sql, params=list(params)).to_arrow_reader(rows_per_batch)
            for batch in reader:
                yield batch.to_pylist()

    def records(self, table: str, where: str = "", params: Sequence[Any] = ()) -> list[Record]:
        """Typed records of `table`, optionally filtered by a SQL `where` clause."""
        spec = TABLES[table]
        clause = f" WHERE {where}" if where else ""
        order = ", ".join(f'"{column}"' for column in spec.key)
        rows = self.rows(f"SELECT * FROM {table}{clause} ORDER BY {order}", params)
        return [spec.record.from_row(row) for row in rows]

    def finished_items(self, stage: str) -> set[str]:
        """Items whose latest status at `stage` is final (`done` or `rejected`)."""
        rows = self.rows(
            "SELECT item_id FROM status WHERE stage = ? AND status IN ('done', 'rejected')",
            [stage],
        )
        return {r["item_id"] for r in rows}

    # --- runs and the persistent catalog ---------------------------------------------------

    @contextmanager
    def _catalog(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The catalog, opened briefly; waits (a few seconds at most) for another writer."""
        for attempt in range(CATALOG_OPEN_ATTEMPTS):
            try:
                con = duckdb.connect(str(self.catalog_path))
                break
            except duckdb.IOException:
                if attempt == CATALOG_OPEN_ATTEMPTS - 1:
                    raise
                time.sleep(0.1)
        try:
            con.execute(
                "CREATE TABLE IF NOT EXISTS runs (run_id VARCHAR PRIMARY KEY, command VARCHAR,"
                " started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, state VARCHAR,"
                " summary VARCHAR)"
            )
            yield con
        finally:
            con.close()

    def start_run(self, command: str) -> str:
        run_id = uuid.uuid4().hex
        with self._catalog() as con:
            con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, NULL, 'running', '{}')",
                [run_id, command, utcnow()],
            )
        return run_id

    def finish_run(self, run_id: str, state: str, summary: dict[str, Any]) -> None:
        """Close a run and refresh the catalog's views over the shards."""
        with self._catalog() as con:
            con.execute(
                "UPDATE runs SET finished_at = ?, state = ?, summary = ? WHERE run_id = ?",
                [utcnow(), state, json.dumps(summary, default=str), run_id],
            )
            for table, spec in TABLES.items():
                if self.shards(table):
                    empty = pa.Table.from_pylist([], schema=spec.record.arrow_schema())
                    con.register("_empty", empty)
                    con.execute(f"CREATE OR REPLACE TABLE {_typed_empty(table)} AS FROM _empty")
                    con.unregister("_empty")
                    glob = str(self.root / table / "*.parquet")
                    con.execute(f"CREATE OR REPLACE VIEW {table} AS {_dedup_sql(glob, table)}")

    def runs(self) -> list[dict[str, Any]]:
        if not self.catalog_path.exists():
            return []
        with self._catalog() as con:
            return con.sql("SELECT * FROM runs ORDER BY started_at").to_arrow_table().to_pylist()


def _query_database(spill: Path) -> duckdb.DuckDBPyConnection:
    """The in-memory database for lake queries spilling to `spill`. One is held at a time: a
    query on another lake replaces it (cursors open on the old one keep it alive until they
    close), and a forked child opens its own, as a database is not carried across a fork."""
    global _query_database_held
    key = (os.getpid(), str(spill))
    with _query_database_lock:
        if _query_database_held is None or _query_database_held[0] != key:
            config = {"memory_limit": QUERY_MEMORY_LIMIT, "temp_directory": str(spill)}
            _query_database_held = (key, duckdb.connect(config=config))
        return _query_database_held[1]


def _dedup_sql(files: list[Path] | str, table: str) -> str:
    """The latest row per key over `files`. Unioned by name with the table's empty typed
    relation, so a column added to a record after older shards were written reads as NULL."""
    spec = TABLES[table]
    if isinstance(files, str):
        source = _quote(files)
    else:
        source = "[" + ", ".join(_quote(str(f)) for f in files) + "]"
    partition = ", ".join(f'"{column}"' for column in spec.key)
    return (
        f"SELECT * EXCLUDE (_shard) FROM (SELECT * FROM read_parquet({source},"
        f" filename = '_shard', union_by_name = true)"
        f" UNION ALL BY NAME SELECT *, NULL::VARCHAR AS _shard FROM {_typed_empty(table)})"
        f' QUALIFY row_number() OVER (PARTITION BY {partition} ORDER BY "{spec.order}" DESC,'
        f" _shard DESC) = 1"
    )


def _typed_empty(table: str) -> str:
    return f"_empty_{table}"


def _tables_in(sql: str) -> set[str]:
    """The lake tables a query mentions (a superset is harmless: views are cheap, not free)."""
    words = set(re.findall(r"[a-z_]+", sql.lower()))
    return {table for table in TABLES if table in words}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
