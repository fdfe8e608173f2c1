"""World stages: ingest hand-written world specs, build worlds from traces' tool calls, and
plant tool-use tasks on every world fit to use (the LLM stages of `families.world_tool_use`)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import duckdb
from pydantic import ValidationError

from data.llm import LLMClient, LLMError
from data.readers import Rejected, regular_file
from data.records import Status, WorldSource, content_id, utcnow
from families.stage import LLMStage, Outcome, StageContext, candidates_outcome, pending_items
from generators import world_tasks
from generators.checks import CheckFailure
from generators.trace_world_draft import draft_spec
from generators.trace_worlds import observe, write_spec
from harnesses.observed_calls import Observation
from harnesses.world import World, WorldSpec, load_world_spec
from judges.world_fidelity import FidelityReport, fidelity

KIND = world_tasks.KIND
SPEC_SUFFIXES = (".toml", ".json")
STAGE = "ingest_worlds"
MAX_SPEC_BYTES = 16_000_000  # a larger spec file is refused unread


# ingest: world spec files -> worlds


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
            statuses.append(ctx.status(STAGE, str(path), "rejected", reason, _first_line(exc)))
            continue
        problem = _start_problem(spec)
        if problem:
            statuses.append(
                ctx.status(STAGE, str(path), "rejected", "world_does_not_start", problem)
            )
            continue
        worlds.append(_record(spec, f"file:{path}", "hand", None))
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
        return _first_line(exc)
    return ""


def _spec_files(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix in SPEC_SUFFIXES))
        else:
            found.append(path)
    return found


def _record(
    spec: WorldSpec, origin: str, written_by: str, report: FidelityReport | None
) -> WorldSource:
    return WorldSource(
        world_id=spec.world_id,
        name=spec.name,
        origin=origin,
        spec=spec.model_dump_json(exclude_defaults=True),
        written_by=written_by,
        fidelity=report.score if report else None,
        fidelity_report=report.to_json() if report else "",
        ingested_at=utcnow(),
    )


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        return f"{where}: {error['msg']}"[:300]
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


# trace_worlds: the traces' tool calls, grouped by the tools offered -> a world each


def _observations(ctx: StageContext) -> dict[str, Observation]:
    """The traces in the scope's window with answered tool calls, grouped by the tools they
    were offered; each group's id hashes its tools and traces (new traces: a new world)."""
    traces = [t for t in ctx.lake.records("traces") if ctx.config.scope.covers(t.occurred_at)]
    return {content_id(o.key, o.trace_ids): o for o in observe(traces)}


def pending_trace_worlds(ctx: StageContext) -> list[str]:
    if not ctx.config.scope.makes(KIND) or not ctx.lake.shards("traces"):
        return []
    finished = ctx.lake.finished_items("trace_worlds")
    return [item for item in _observations(ctx) if item not in finished]


def load_observations(ctx: StageContext, items: list[str]) -> dict[str, Observation]:
    observations = _observations(ctx)
    return {item: observations[item] for item in items if item in observations}


async def build_trace_world(
    ctx: StageContext, item: str, observation: Observation, client: LLMClient
) -> Outcome:
    """The mechanical draft, then up to `worlds.refine_rounds` rewrites by the generator model,
    each told the mismatches of the best world so far; the best by fidelity is stored, and
    used for tasks only when its fidelity reaches `worlds.min_fidelity`."""
    config = ctx.config.worlds
    try:
        best = draft_spec(observation, f"traced_{observation.key[:8]}")
    except CheckFailure as failure:
        return Outcome(ctx.status("trace_worlds", item, "rejected", failure.reason))
    except ValueError as exc:  # the tools' names or fields make no valid spec
        return Outcome(ctx.status("trace_worlds", item, "rejected", "no_draft", _first_line(exc)))
    report, written_by = await asyncio.to_thread(fidelity, best, observation), "draft"
    parts = []
    for round_ in range(config.refine_rounds):
        if report.score >= 1.0:
            break
        try:
            spec = await write_spec(
                observation, best, client, feedback="\n".join(report.mismatches)
            )
        except LLMError as error:
            part = f"{item}#{round_}"
            parts.append(
                ctx.status("trace_world_round", part, "rejected", error.reason, error.detail)
            )
            continue
        rewritten = await asyncio.to_thread(fidelity, spec, observation)
        detail = f"fidelity {rewritten.score:.2f} (best so far {report.score:.2f})"
        parts.append(ctx.status("trace_world_round", f"{item}#{round_}", "done", "written", detail))
        if rewritten.score > report.score:
            best, report, written_by = spec, rewritten, "model"
    record = _record(best, f"traces:{observation.key}", written_by, report)
    detail = f"{best.world_id} fidelity {report.score:.2f} over {report.calls} calls ({written_by})"
    if report.score < config.min_fidelity:
        mismatches = "; ".join(report.mismatches[:5])
        status = ctx.status(
            "trace_worlds", item, "rejected", "low_fidelity", f"{detail}: {mismatches}"
        )
    else:
        status = ctx.status("trace_worlds", item, "done", "built", detail)
    return Outcome(status, {"worlds": [record]}, parts)


TRACE_WORLDS = LLMStage("trace_worlds", pending_trace_worlds, load_observations, build_trace_world)


# world_tasks: a world fit to use -> planted tool-use tasks


def pending_world_tasks(ctx: StageContext) -> list[str]:
    """Worlds written by hand, or built from traces with enough fidelity."""
    if not ctx.config.scope.makes(KIND):
        return []
    sql = (
        "SELECT world_id AS id FROM worlds"
        f" WHERE fidelity IS NULL OR fidelity >= {float(ctx.config.worlds.min_fidelity)!r}"
        " ORDER BY world_id"
    )
    return pending_items(ctx, "world_tasks", sql)


def load_worlds(ctx: StageContext, world_ids: list[str]) -> dict[str, world_tasks.LoadedWorld]:
    return {
        w.world_id: world_tasks.LoadedWorld(
            w.world_id, w.origin, WorldSpec.model_validate_json(w.spec)
        )
        for w in ctx.lake.records("worlds", "list_contains(?, world_id)", [world_ids])
    }


async def world_tasks_one(
    ctx: StageContext, world_id: str, world: world_tasks.LoadedWorld, client: LLMClient
) -> Outcome:
    try:
        results = await world_tasks.generate(world, client, ctx.config.worlds)
    except duckdb.Error as exc:  # a world from traces whose seed does not load
        detail = _first_line(exc)
        return Outcome(
            ctx.status("world_tasks", world_id, "rejected", "world_does_not_start", detail)
        )
    return candidates_outcome(ctx, "world_tasks", world_id, "world_candidate", results)


WORLD_TASKS = LLMStage("world_tasks", pending_world_tasks, load_worlds, world_tasks_one)
