"""Tool worlds: hand-written world specs (`.toml` / `.json` files, or folders of them), each
checked to load and start, stored in the lake's `worlds` table; the world family plants
tool-use tasks on them (worlds built from traces' tool calls come from `families.world_stages`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb

from data.config import FoundryConfig
from data.documents import Rejected, regular_file
from data.export import Grouping, Row, knobs_of
from data.lake import Lake, Status, WorldSource
from families.stage import StageContext
from families.world_stages import first_line, world_record
from harnesses.world import World, WorldSpec, load_world_spec
from sources.base import Source

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "samples" / "worlds"
SPEC_SUFFIXES = (".toml", ".json")
STAGE = "ingest_worlds"
MAX_SPEC_BYTES = 16_000_000  # a larger spec file is refused unread


def ingest_world_files(paths: list[str], ctx: StageContext) -> Counter:
    """Load every world spec under `paths` (files, or folders of `.toml` / `.json` specs);
    a spec that does not load is recorded with its reason and the rest go on."""
    worlds: list[WorldSource] = []
    statuses: list[Status] = []
    for path in _spec_files(paths):
        refusal = _refusal(path)
        if refusal:
            statuses.append(ctx.status(STAGE, str(path), "rejected", *refusal))
            continue
        try:
            spec = load_world_spec(path)
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            reason = "unreadable_file" if isinstance(exc, OSError) else "invalid_world_spec"
            statuses.append(ctx.status(STAGE, str(path), "rejected", reason, first_line(exc)))
            continue
        problem = _start_problem(spec)
        if problem:
            statuses.append(
                ctx.status(STAGE, str(path), "rejected", "world_does_not_start", problem)
            )
            continue
        worlds.append(world_record(spec, f"file:{path}", "hand", None))
        statuses.append(ctx.status(STAGE, str(path), "done", "ingested", spec.world_id))
    ctx.lake.write("worlds", worlds, ctx.run_id)
    ctx.lake.write("status", statuses, ctx.run_id)
    ctx.progress(f"ingest_worlds: {len(worlds)} worlds from {len(statuses)} files")
    return Counter(f"{s.status}:{s.reason}" for s in statuses)


def _refusal(path: Path) -> tuple[str, str] | None:
    """Why the spec file at `path` is not read (not a regular file, or too large), or None."""
    info = regular_file(path)
    if isinstance(info, Rejected):
        return info.reason, info.detail
    if info.st_size > MAX_SPEC_BYTES:
        return "too_large", f"{info.st_size} bytes > {MAX_SPEC_BYTES}"
    return None


def _start_problem(spec: WorldSpec) -> str:
    """Why a valid spec's world does not start (a seed row with a duplicate key, a value of the
    wrong type), or ""."""
    try:
        World(spec).close()
    except (duckdb.Error, ValueError) as exc:
        return first_line(exc)
    return ""


def _spec_files(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix in SPEC_SUFFIXES))
        else:
            found.append(path)
    return found


def _read(items: list[str], ctx: StageContext, options: Mapping[str, Any]) -> dict[str, Any]:
    return dict(ingest_world_files(items, ctx))


def estimate_worlds(items: list[str], config: FoundryConfig, lake: Lake) -> int:
    """The world specs under `items` the lake has not read."""
    read = lake.finished_items(STAGE)
    return sum(1 for path in _spec_files(items) if str(path) not in read)


def goal_keys(row: Row) -> list[str]:
    """A world task's world and the goal it was planted from (whatever field the goal asks)."""
    world = json.loads(row.get("world") or "null")
    if not world:
        return []
    goal = str(knobs_of(row).get("goal", "")).split("?")[0]
    return [f"goal:{world['world_id']}/{goal}"]


SOURCE = Source(
    name="worlds",
    help="simulated tool worlds: world spec files (.toml .json)",
    items="world spec files or folders (.toml .json)",
    read=_read,
    tables=("worlds",),
    grouping=Grouping("worlds", "goal: the world and the goal a task is planted from", goal_keys),
    sample=lambda ctx: [str(SAMPLE)],
    unit_stage="world_tasks",
    estimate=estimate_worlds,
)
