"""Prefect flows: one per stage and `pipeline`, which runs them in order and exports.

A Prefect task is a batch of items (not one LLM call); inside a batch the LLM client runs the
calls concurrently. Resuming is the lake's job (items finished at a stage are skipped), so task
result caching is off. Flows take plain parameters (paths, home, config), so they can back
deployments with a form in the UI.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, replace
from functools import cache
from pathlib import Path
from typing import Any

from prefect import Flow, flow, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import TerminationSignal
from prefect.futures import PrefectFuture, as_completed, wait
from prefect.states import State

from data.config import FoundryConfig, load_config, with_overrides, with_solver
from data.costs import Budget, Cost, carried_spend, ledger_path, open_ledger
from data.export import (
    ExportResult,
    Projection,
    awaits_approval,
    export_taskset,
    project,
    publish_version,
)
from data.lake import Lake, funnel, run_spend, run_usage
from data.llm import Endpoint, resolve_endpoints, shared_among
from data.plan import check_endpoints
from data.review import diagnose
from data.runtime import interrupt
from families import export_kinds, sandbox_stages, stage_kinds
from families.stage import LLMStage, SandboxStage, StageContext
from flows.artifacts import publish_run_artifacts
from flows.judge_variance import measure_variance, variance_sample
from flows.publish_gate import gate
from flows.runners import task_runner
from flows.stage_runs import run_llm_batch, run_stages, solver_through_proxy
from flows.stages import (
    check_extensions,
    check_kinds,
    command_stages,
    llm_stages,
    sandbox_named,
    stage_named,
)
from flows.stops import ended_by_stop
from judges.agreement import seed_variance
from judges.verifier_types import package_graders
from sources import REGISTERED as SOURCES
from sources import check_sources, groupings, source_named

BATCH_STOP_WAIT_S = 10.0  # on a stop, how long the batches in flight get to write their work


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_config(
    home: str | None, config: str | None, overrides: dict[str, Any] | None = None
) -> FoundryConfig:
    """The run's configuration: the file (or the defaults), `overrides` over it (nested as in
    the file); its task kinds must be registered."""
    cfg = load_config(Path(config) if config else None, Path(home) if home else None)
    if overrides:
        cfg = with_overrides(cfg, overrides)
    check_kinds(cfg.scope.kinds)
    check_extensions(cfg)
    return cfg


@contextmanager
def stage_context(
    command: str, home: str | None, config: str | None, overrides: dict[str, Any] | None = None
) -> Iterator[StageContext]:
    """Load the configuration (`run_config`), open the lake and record the run (failed if an
    error escapes)."""
    cfg = run_config(home, config, overrides)
    lake = Lake(cfg.home)
    carried, resumed = carried_spend(cfg.home, lake.runs(), command)
    run_id = lake.start_run(command)
    ledger = ledger_path(cfg.home, run_id)
    open_ledger(ledger)
    budget = Budget(
        cfg.budget.max_tokens,
        cfg.budget.max_cost_usd,
        tokens=carried.tokens,
        cost_usd=carried.at_most_usd,
        ledger=ledger,
        carried_usd=carried.at_most_usd,
        carried_tokens=carried.tokens,
        carried_runs=resumed,
        unpriced=carried.at_most.unpriced,
    )
    if resumed:
        _progress(
            f"budget: {resumed} unfinished run(s) of `{command}` before this one spent"
            f" {carried.at_most.text()} and {carried.tokens:,} tokens (their ledgers):"
            " counted against this run's limits"
        )
    ctx = StageContext(lake=lake, config=cfg, run_id=run_id, progress=_progress, budget=budget)
    state = "failed"
    try:
        yield ctx
        state = "completed"
    except BaseException as exc:
        if ended_by_stop(exc):
            state = "interrupted"
        raise
    finally:
        summary: dict[str, Any] = run_usage(lake, run_id)
        if ctx.sandbox_time:
            summary["sandbox"] = ctx.sandbox_time
        lake.finish_run(run_id, state, summary)


# --- tasks (batches) ---------------------------------------------------------------------


@task(name="ingest", cache_policy=NO_CACHE, task_run_name="ingest-{source}")
def ingest_task(
    source: str, items: list[str], options: dict[str, Any], ctx: StageContext
) -> dict[str, Any]:
    return source_named(source).read(items, ctx, options)


@task(name="sandbox", cache_policy=NO_CACHE, task_run_name="{stage}")
def sandbox_task(stage: str, ctx: StageContext) -> dict[str, int]:
    return dict(sandbox_named(stage).run(ctx))


def run_sandbox_stage(stage: SandboxStage, ctx: StageContext) -> dict[str, int]:
    """Run sandbox stage `stage` over its pending items, keeping how many it took and how long
    (`StageContext.sandbox_time`)."""
    items = len(stage.pending(ctx))
    started = time.monotonic()
    counts = sandbox_task(stage.name, ctx)
    timed = ctx.sandbox_time.setdefault(stage.name, {"items": 0, "seconds": 0.0})
    timed["items"] += items
    timed["seconds"] += time.monotonic() - started
    return counts


@task(name="llm-batch", cache_policy=NO_CACHE, task_run_name="{stage}-batch-{index}")
def llm_batch_task(
    stage: str, index: int, items: list[str], ctx: StageContext, endpoints: dict[str, Endpoint]
) -> dict[str, int]:
    return dict(run_llm_batch(stage_named(stage), items, ctx, endpoints))


@task(name="export", cache_policy=NO_CACHE)
def export_task(
    ctx: StageContext,
    out: str | None,
    band: tuple[float, float] | None,
    solver: str | None = None,
    name_by_solver: bool = True,
    loop: dict[str, Any] | None = None,
    publish: bool = True,
) -> ExportResult:
    base = Path(out) if out else ctx.config.home / "tasksets"
    return export_taskset(
        ctx.lake,
        ctx.config.export.name,
        base,
        band,
        ctx.config.export.rows_per_part,
        solver,
        kinds=export_kinds(),
        groupings=groupings(),
        search_turns=ctx.config.calibrate.max_turns,
        eval_share=ctx.config.export.eval_share,
        name_by_solver=name_by_solver,
        loop=loop,
        review_required=ctx.config.review.required,
        publish=publish,
        licensing=ctx.config.export.licensing(),
    )


@task(name="project", cache_policy=NO_CACHE, task_run_name="project-{fmt}")
def project_task(ctx: StageContext, version: Path, fmt: str) -> Projection:
    return project(version, fmt, ctx.lake, graders=package_graders())


def _export_summary(
    ctx: StageContext, result: ExportResult, formats: list[str] | None
) -> dict[str, Any]:
    """The export's figures, after writing its trainer projections (`formats`, else the
    configured ones)."""
    summary: dict[str, Any] = {
        "path": str(result.path),
        "n_tasks": result.n_tasks,
        "written": result.written,
        "projections": {},
    }
    for fmt in formats if formats is not None else ctx.config.export.formats:
        done = project_task(ctx, result.path, fmt)
        summary["projections"][fmt] = {
            "path": str(done.path),
            "rows": done.rows,
            "written": done.written,
            "skipped": done.skipped,
        }
    return summary


def run_llm_stages(
    names: Sequence[str | LLMStage],
    ctx: StageContext,
    resolved: dict[str, Endpoint] | None = None,
) -> dict[str, dict[str, int]]:
    """Run the LLM stages (given or named) in order, their batches on the configured task
    runner; the model endpoints (unless `resolved` already) and the runner are opened only if
    needed."""
    stages = [name if isinstance(name, LLMStage) else stage_named(name) for name in names]
    if not any(s.pending(ctx) for s in stages):
        ctx.progress("nothing pending for " + ", ".join(s.name for s in stages))
        return {s.name: {} for s in stages}
    with ExitStack() as stack:
        if resolved is None:
            resolved = stack.enter_context(_model_servers(ctx))
        endpoints = stack.enter_context(solver_through_proxy(ctx, resolved))
        runner = stack.enter_context(task_runner(ctx.config.runner))

        def run_batches(stage: LLMStage, groups: list[list[str]]) -> Iterator[Counter]:
            """Up to `runner.workers` batches at once (one where a batch reads what the ones
            before it wrote), each submitted with the budget spent so far; none is started
            once it is spent. Batches in other processes share each server's request limit."""
            width = ctx.config.runner.workers if stage.independent_batches else 1
            elsewhere = ctx.config.runner.kind == "dask"  # batches in other processes
            limited = shared_among(endpoints, width) if elsewhere else endpoints
            queue = list(enumerate(groups))
            running: list[PrefectFuture] = []
            try:
                while queue or running:
                    while queue and len(running) < width and not ctx.budget.exhausted:
                        index, items = queue.pop(0)
                        parameters = {
                            "stage": stage.name,
                            "index": index,
                            "items": items,
                            "ctx": ctx,
                            "endpoints": limited,
                        }
                        running.append(runner.submit(llm_batch_task, parameters))
                    if not running:
                        return
                    finished = next(as_completed(running))
                    running.remove(finished)
                    counts = Counter(finished.result())
                    if elsewhere:  # batches elsewhere charged copies of the budget: settle
                        ctx.budget.settle(*run_spend(ctx.lake, ctx.run_id))
                    yield counts
            except (KeyboardInterrupt, TerminationSignal) as stop:
                # the batches in flight see the stop too: let them write what they finished
                # before the model servers they talk to are stopped
                if isinstance(stop, TerminationSignal):  # Prefect's SIGTERM handler took it
                    interrupt.request(stop.signal)
                wait(running, timeout=BATCH_STOP_WAIT_S)
                raise

        summary = run_stages(stages, ctx, run_batches)
    return {name: dict(counts) for name, counts in summary.items()}


@contextmanager
def _model_servers(ctx: StageContext) -> Iterator[dict[str, Endpoint]]:
    """The run's model endpoints (see `resolve_endpoints`), said on the progress sink, with a
    warning for each model that has no price; a cost limit with one is refused
    (`data.plan.price_check`)."""
    with resolve_endpoints(ctx.config, ctx.config.home / "logs", ctx.progress) as endpoints:
        check_endpoints(endpoints, ctx.budget.max_cost_usd, ctx.progress)
        yield endpoints


# --- flows -------------------------------------------------------------------------------


@flow(name="ingest", log_prints=False)
def ingest_flow(
    source: str,
    items: list[str],
    options: dict[str, str] | None = None,
    home: str | None = None,
    config: str | None = None,
) -> dict:
    """Ingest `items` as sources of type `source` (`sources.REGISTERED`: documents, git
    repositories, production traces, tool world specs), with that type's `options` (a
    repository's `rev`)."""
    with stage_context("ingest", home, config) as ctx:
        return ingest_task(source, items, options or {}, ctx)


def _sandbox_flow(stage: SandboxStage):
    """The flow of sandbox stage `stage`."""

    @flow(name=stage.name, description=stage.help)
    def stage_flow(home: str | None = None, config: str | None = None) -> dict:
        with stage_context(stage.name, home, config) as ctx:
            return run_sandbox_stage(stage, ctx)

    return stage_flow


def _llm_stage_flow(stage: LLMStage):
    """The flow of LLM stage `stage`, after the judges' control items (`FIRST`): any stage may
    ask the panel, and a judge below its control bar decides nothing."""

    @flow(name=stage.name, description=stage.help)
    def stage_flow(home: str | None = None, config: str | None = None) -> dict:
        with stage_context(stage.name, home, config) as ctx:
            first = [name for name in FIRST if name != stage.name]
            return run_llm_stages([*first, stage.name], ctx)[stage.name]

    return stage_flow


FIRST = ("controls",)  # the judges' figures before any of their verdicts


@cache
def stage_flow(name: str) -> Flow:
    """The flow of stage `name`, one of those with a command of their own (`command_stages`)."""
    stage = next(stage for stage in command_stages() if stage.name == name)
    if isinstance(stage, SandboxStage):
        return _sandbox_flow(stage)
    return _llm_stage_flow(stage)


@flow(name="calibrate")
def calibrate_flow(
    home: str | None = None,
    config: str | None = None,
    solver: str | None = None,
    solver_url: str | None = None,
) -> dict:
    """Calibrate verified tasks against the configured solver or, with `solver`, against that
    model (at `solver_url`, else the configured solver's server), kept beside earlier ones."""
    with stage_context("calibrate", home, config) as ctx:
        if solver is None:
            return run_llm_stages(["calibrate"], ctx)["calibrate"]
        ctx.config = with_solver(ctx.config, solver, solver_url)
        stage = f"calibrate:{solver}"
        return run_llm_stages([stage], ctx)[stage]


@flow(name="judge-variance")
def judge_variance_flow(
    home: str | None = None,
    config: str | None = None,
    tasks: int = 20,
    seeds: int = 2,
    temperature: float | None = None,
) -> dict[str, Any]:
    """Re-ask the judges' open-book verdicts on `tasks` tasks with `seeds` other seeds (at
    `temperature` if given) and report how often each judge's decision flipped."""
    with stage_context("judge-variance", home, config) as ctx:
        sample = variance_sample(ctx, tasks)
        if not sample.tasks:
            ctx.progress("judge-variance: no judged tasks yet")
            return {}
        with _model_servers(ctx) as endpoints:
            reruns = measure_variance(ctx, endpoints, sample, seeds, temperature)
        ctx.progress(f"judge-variance: {len(reruns)} verdicts re-asked")
        return seed_variance(ctx.lake)


@flow(name="export")
def export_flow(
    home: str | None = None,
    config: str | None = None,
    out: str | None = None,
    band: tuple[float, float] | None = None,
    solver: str | None = None,
    formats: list[str] | None = None,
    publish_to: str | None = None,
) -> dict[str, Any]:
    """Write the next taskset version (or find it unchanged), its trainer projections
    (`formats`, else `[export] formats`), and publish it whole to `publish_to` (else
    `[export] publish_to`; `data.export.publish`)."""
    with stage_context("export", home, config) as ctx:
        result = export_task(ctx, out, band, solver)
        summary = _export_summary(ctx, result, formats)
        summary["published"] = publish_task(result.path, publish_to or ctx.config.export.publish_to)
        return summary


@task(name="publish", cache_policy=NO_CACHE)
def publish_task(version: Path, destination: str) -> dict[str, Any] | None:
    """Publish `version` whole to `destination` (None: no destination is set, or the version
    waits for approval, which publishes it once given)."""
    if not destination or awaits_approval(version):
        return None
    return asdict(publish_version(version, destination))


@flow(name="pipeline")
def pipeline_flow(
    sources: dict[str, list[str]] | None = None,
    home: str | None = None,
    config: str | None = None,
    out: str | None = None,
    band: tuple[float, float] | None = None,
    max_tokens: int | None = None,
    max_cost_usd: float | None = None,
    overrides: dict[str, Any] | None = None,
    publish_gate: bool | None = None,
) -> dict[str, Any] | State:
    """Ingest `sources` (items by source type: `docs`, `repos`, `traces`, `worlds`), or, when
    none is given and the lake has no source yet, the bundled samples of each type; run every
    stage over what is not done yet, and export. `max_tokens` and `max_cost_usd` override the
    configured budget, `overrides` any setting (nested as in the file). With `publish_gate`
    (None: `[serve] publish_gate`), a new version waits for approval in the Prefect UI before
    it becomes `latest` (`flows.publish_gate`)."""
    settings = run_config(home, config, overrides)
    serve = settings.serve
    gated = serve.publish_gate if publish_gate is None else publish_gate
    summary = run_pipeline(
        sources, home, config, out, band, max_tokens, max_cost_usd, overrides, publish=not gated
    )
    if not gated:
        return summary
    decided = gate(summary["export"], serve.publish_timeout_h)
    if isinstance(decided, State):
        return decided
    export = summary["export"]
    export["published"] = publish_task(Path(export["path"]), settings.export.publish_to)
    return {**summary, "publish": decided}


def run_pipeline(
    sources: dict[str, list[str]] | None,
    home: str | None,
    config: str | None,
    out: str | None,
    band: tuple[float, float] | None,
    max_tokens: int | None,
    max_cost_usd: float | None,
    overrides: dict[str, Any] | None,
    publish: bool = True,
) -> dict[str, Any]:
    """The pipeline flow's work, inside whichever flow calls it (so its tasks and artifacts
    belong to that flow's run); without `publish`, a new version waits for approval."""
    given = {name: list(items) for name, items in (sources or {}).items() if items}
    check_sources(given)
    with stage_context("run", home, config, overrides) as ctx, ExitStack() as servers:
        if max_tokens is not None or max_cost_usd is not None:
            limits = ctx.config.budget
            ctx.budget = replace(
                ctx.budget,
                max_tokens=max_tokens if max_tokens is not None else limits.max_tokens,
                max_cost_usd=max_cost_usd if max_cost_usd is not None else limits.max_cost_usd,
            )
        summary: dict[str, Any] = {}
        empty = not any(ctx.lake.shards(table) for s in SOURCES for table in s.tables)
        if not given and empty:
            given = {source.name: source.sample(ctx) for source in SOURCES}
            samples = ", ".join(item for items in given.values() for item in items)
            ctx.progress(f"no sources yet: ingesting the bundled samples ({samples})")
        # a run that brings new sources has model work ahead: its servers are started and
        # checked first, so a server that cannot be used stops it before any stage runs
        resolved = servers.enter_context(_model_servers(ctx)) if given else None
        for source in SOURCES:
            if given.get(source.name):
                ingested = ingest_task(source.name, given[source.name], {}, ctx)
                summary.setdefault("ingest", {})[source.name] = ingested
        for stage in sandbox_stages():
            if stage.pending(ctx):
                summary[stage.name] = run_sandbox_stage(stage, ctx)
        summary.update(run_llm_stages([s.name for s in llm_stages()], ctx, resolved))
        exported = export_task(ctx, out, band, publish=publish)
        summary["export"] = _export_summary(ctx, exported, None)
        summary["export"]["published"] = publish_task(exported.path, ctx.config.export.publish_to)
        summary["budget"] = ctx.budget.report()
        summary["usage"] = run_usage(ctx.lake, ctx.run_id)
        _, priced_usd, unpriced = run_spend(ctx.lake, ctx.run_id)
        summary["cost"] = Cost.of(priced_usd, unpriced).to_json()
        summary["funnel"] = funnel(ctx.lake)
        exported = summary["export"]["n_tasks"]
        stages = summary["funnel"]["stages"]
        thin = diagnose(ctx.lake, ctx.config, stages, exported, stage_kinds())
        summary["diagnosis"] = thin.lines() if thin else []
        summary["artifacts"] = publish_run_artifacts(
            ctx, summary["export"], summary["funnel"]["stages"]
        )
        return summary
