"""World stages: build worlds from traces' tool calls, and plant tool-use tasks on every world
fit to use (the LLM stages of `families.world_tool_use`; hand-written specs come in through
`sources.worlds`)."""

from __future__ import annotations

import asyncio

import duckdb
from pydantic import ValidationError

import families
from data.lake import WorldSource, content_id, utcnow
from data.llm import LLMClient, LLMError
from families.stage import LLMStage, Outcome, StageContext, candidates_outcome, pending_items
from generators import world_tasks
from generators.checks import CheckFailure
from generators.trace_world_draft import draft_spec
from generators.trace_worlds import observe, write_spec
from harnesses.observed_calls import Observation
from harnesses.world import WorldSpec
from judges.world_fidelity import FidelityReport, fidelity


def world_record(
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


def first_line(exc: BaseException) -> str:
    """An error's first line (a validation error's first problem), for a status detail."""
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
    kinds = families.kinds_running(TRACE_WORLDS)
    if not ctx.config.scope.makes(*kinds) or not ctx.lake.shards("traces"):
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
        return Outcome(ctx.status("trace_worlds", item, "rejected", "no_draft", first_line(exc)))
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
    record = world_record(best, f"traces:{observation.key}", written_by, report)
    detail = f"{best.world_id} fidelity {report.score:.2f} over {report.calls} calls ({written_by})"
    if report.score < config.min_fidelity:
        mismatches = "; ".join(report.mismatches[:5])
        status = ctx.status(
            "trace_worlds", item, "rejected", "low_fidelity", f"{detail}: {mismatches}"
        )
    else:
        status = ctx.status("trace_worlds", item, "done", "built", detail)
    return Outcome(status, {"worlds": [record]}, parts)


TRACE_WORLDS = LLMStage(
    "trace_worlds",
    pending_trace_worlds,
    load_observations,
    build_trace_world,
    help="build tool worlds from the traces' tool calls; score their fidelity",
)


# world_tasks: a world fit to use -> planted tool-use tasks


def pending_world_tasks(ctx: StageContext) -> list[str]:
    """Worlds written by hand, or built from traces with enough fidelity."""
    if not ctx.config.scope.makes(*families.kinds_running(WORLD_TASKS)):
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
        detail = first_line(exc)
        return Outcome(
            ctx.status("world_tasks", world_id, "rejected", "world_does_not_start", detail)
        )
    return candidates_outcome(ctx, "world_tasks", world_id, "world_candidate", results)


WORLD_TASKS = LLMStage(
    "world_tasks",
    pending_world_tasks,
    load_worlds,
    world_tasks_one,
    help="plant tool-use tasks on the worlds: gold calls and final state",
)
