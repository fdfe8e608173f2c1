"""`foundry run --plan`: a run's units of work, counted from its sources and the lake, and the
estimate `data.plan.estimate` makes of them for every stage of the pipeline's registry (no model is
called, nothing is written to the lake)."""

from __future__ import annotations

from data.config import FoundryConfig
from data.lake import Lake
from data.plan import RunPlan, Work, plan_run
from families.stage import StageContext
from flows.stages import llm_stages, sandbox_stages
from sources import REGISTERED as SOURCES
from sources import source_named

REPOSITORIES = "repos"  # the source type whose items (repositories) code tasks are made of


def estimate_run(given: dict[str, list[str]], config: FoundryConfig) -> RunPlan:
    """The estimate for `foundry run` with the items `given` by source type (none and an empty
    lake: the bundled samples, as the run takes them) under `config`."""
    lake = Lake(config.home)
    ctx = StageContext(lake=lake, config=config, run_id="plan")
    given = {name: items for name, items in given.items() if items}
    notes = []
    if not given and not any(lake.shards(t) for s in SOURCES for t in s.tables):
        given = {source.name: source.sample(ctx) for source in SOURCES}
        notes.append("no sources yet: the bundled samples, as the run would ingest them")
    stages = {stage.name: stage for stage in (*llm_stages(), *sandbox_stages())}
    units = {}
    for source in SOURCES:
        stage = stages.get(source.unit_stage)
        pending = len(stage.pending(ctx)) if stage else 0
        new = source.estimate(given.get(source.name, []), config, lake)
        cap = source.unit_cap(config)
        if cap is not None:
            room = max(0, cap - len(lake.finished_items(source.unit_stage)) - pending)
            new = min(new, room)
        units[source.name] = pending + new
    work = Work(units, _repositories(ctx, given))
    plan = plan_run(
        lake,
        config,
        work,
        [s.unit_stage for s in SOURCES],
        [s.name for s in llm_stages()],
        [s.name for s in sandbox_stages()],
    )
    plan.notes += notes
    return plan


def _repositories(ctx: StageContext, given: dict[str, list[str]]) -> int:
    """The repositories the run will make code tasks of at their HEAD: those given, and those
    in the lake a sandbox stage after the first has not finished."""
    first = source_named(REPOSITORIES).unit_stage
    pending = [len(s.pending(ctx)) for s in sandbox_stages() if s.name != first]
    return len(given.get(REPOSITORIES, [])) + max(pending, default=0)
