"""Prefect flows: one per stage and `pipeline`, which runs them in order and exports.

A Prefect task is a batch of items (not one LLM call); inside a batch the LLM client runs the
calls concurrently. Resuming is the lake's job (items finished at a stage are skipped), so task
result caching is off. Flows take plain parameters (paths, home, config), so they can back
deployments with a form in the UI.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import TerminationSignal
from prefect.futures import PrefectFuture, as_completed, wait

from data.budget import Budget
from data.config import load_config, with_overrides, with_solver
from data.endpoints import Endpoint, shared_among
from data.export import ExportResult, export_taskset
from data.funnel import funnel, run_spend, run_usage
from data.hub import push_version
from data.lake import Lake
from data.model_servers import resolve_endpoints
from data.projections import Projection, project
from data.runtime import interrupt
from data.sample_repo import LEDGERLINE, PARCELRATE, SampleRepo, build_sample_repo
from families import export_kinds
from families.code_stages import (
    ingest_repository,
    inject_bugs,
    pending_injections,
    pending_rebuilds,
    pending_replays,
    rebuild_functions,
    replay_commits,
)
from families.stage import LLMStage, StageContext
from families.trace_stages import ingest_trace_files
from families.world_stages import ingest_world_files
from flows.artifacts import publish_run_artifacts
from flows.judge_variance import measure_variance, variance_sample
from flows.runners import task_runner
from flows.stage_runs import run_llm_batch, run_stages, solver_through_proxy
from flows.stages import check_kinds, ingest_docs, llm_stages, stage_named
from flows.stops import ended_by_stop
from judges.agreement import seed_variance
from judges.verifier_types import package_graders

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"
SAMPLE_DOCS = SAMPLES / "docs"
SAMPLE_TRACES = SAMPLES / "traces"
SAMPLE_WORLDS = SAMPLES / "worlds"
SOURCE_TABLES = ("sources", "repos", "traces", "worlds")
BATCH_STOP_WAIT_S = 10.0  # on a stop, how long the batches in flight get to write their work


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def stage_context(
    command: str, home: str | None, config: str | None, overrides: dict[str, Any] | None = None
) -> Iterator[StageContext]:
    """Load the configuration (with `overrides` over it; its task kinds must be registered),
    open the lake and record the run (failed if an error escapes)."""
    cfg = load_config(Path(config) if config else None, Path(home) if home else None)
    if overrides:
        cfg = with_overrides(cfg, overrides)
    check_kinds(cfg.scope.kinds)
    lake = Lake(cfg.home)
    run_id = lake.start_run(command)
    budget = Budget(cfg.budget.max_tokens, cfg.budget.max_cost_usd)
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
        lake.finish_run(run_id, state, run_usage(lake, run_id))


# --- tasks (batches) ---------------------------------------------------------------------


@task(name="ingest-docs", cache_policy=NO_CACHE)
def ingest_task(paths: list[str], ctx: StageContext) -> dict[str, int]:
    return dict(ingest_docs(paths, ctx))


@task(name="ingest-repo", cache_policy=NO_CACHE)
def ingest_repo_task(origin: str, rev: str | None, ctx: StageContext) -> dict[str, int]:
    return dict(ingest_repository(origin, rev, ctx))


@task(name="ingest-traces", cache_policy=NO_CACHE)
def ingest_traces_task(paths: list[str], ctx: StageContext) -> dict[str, int]:
    return dict(ingest_trace_files(paths, ctx))


@task(name="ingest-worlds", cache_policy=NO_CACHE)
def ingest_worlds_task(paths: list[str], ctx: StageContext) -> dict[str, int]:
    return dict(ingest_world_files(paths, ctx))


@task(name="replay-commits", cache_policy=NO_CACHE)
def replay_task(ctx: StageContext) -> dict[str, int]:
    return dict(replay_commits(ctx))


@task(name="rebuild-functions", cache_policy=NO_CACHE)
def rebuild_task(ctx: StageContext) -> dict[str, int]:
    return dict(rebuild_functions(ctx))


@task(name="inject-bugs", cache_policy=NO_CACHE)
def inject_task(ctx: StageContext) -> dict[str, int]:
    return dict(inject_bugs(ctx))


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
        search_turns=ctx.config.calibrate.max_turns,
        eval_share=ctx.config.export.eval_share,
        name_by_solver=name_by_solver,
        loop=loop,
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


def _model_servers(ctx: StageContext):
    """The run's model endpoints (see `resolve_endpoints`), said on the progress sink."""
    return resolve_endpoints(ctx.config, ctx.config.home / "logs", ctx.progress)


# --- flows -------------------------------------------------------------------------------


@flow(name="ingest", log_prints=False)
def ingest_flow(paths: list[str], home: str | None = None, config: str | None = None) -> dict:
    with stage_context("ingest", home, config) as ctx:
        return ingest_task(paths, ctx)


@flow(name="ingest-repo", log_prints=False)
def ingest_repo_flow(
    origin: str, rev: str | None = None, home: str | None = None, config: str | None = None
) -> dict:
    """Mirror the git repository at `origin` (a path or URL) and record the commits of `rev`
    (a `git rev-list` range; default the history of HEAD)."""
    with stage_context("ingest-repo", home, config) as ctx:
        return ingest_repo_task(origin, rev, ctx)


@flow(name="ingest-traces", log_prints=False)
def ingest_traces_flow(
    paths: list[str], home: str | None = None, config: str | None = None
) -> dict:
    """Read production traces (OpenAI-style JSONL, OpenTelemetry GenAI spans, the proxy's
    records), scrub them, and store them for clustering and task generation."""
    with stage_context("ingest-traces", home, config) as ctx:
        return ingest_traces_task(paths, ctx)


@flow(name="ingest-worlds", log_prints=False)
def ingest_worlds_flow(
    paths: list[str], home: str | None = None, config: str | None = None
) -> dict:
    """Load simulated tool worlds (`.toml` / `.json` world specs, or folders of them)."""
    with stage_context("ingest-worlds", home, config) as ctx:
        return ingest_worlds_task(paths, ctx)


@flow(name="replay")
def replay_flow(home: str | None = None, config: str | None = None) -> dict:
    """Replay ingested commits in the sandbox: F2P / P2P tests and a checked reference patch."""
    with stage_context("replay", home, config) as ctx:
        return replay_task(ctx)


@flow(name="rebuild")
def rebuild_flow(home: str | None = None, config: str | None = None) -> dict:
    """Function-rebuild tasks from ingested repositories: each covered function's body taken
    out and tried in the sandbox."""
    with stage_context("rebuild", home, config) as ctx:
        return rebuild_task(ctx)


@flow(name="inject")
def inject_flow(home: str | None = None, config: str | None = None) -> dict:
    """Bug-fix tasks from ingested repositories: a bug put into each covered function, kept
    where the tests notice it, in the sandbox."""
    with stage_context("inject", home, config) as ctx:
        return inject_task(ctx)


def _llm_stage_flow(name: str, first: tuple[str, ...] = ()):
    """The flow of LLM stage `name`, after the stages `first` (what it relies on)."""

    @flow(name=name)
    def stage_flow(home: str | None = None, config: str | None = None) -> dict:
        with stage_context(name, home, config) as ctx:
            return run_llm_stages([*first, name], ctx)[name]

    return stage_flow


generate_flow = _llm_stage_flow("generate")
describe_flow = _llm_stage_flow("describe")
sequence_flow = _llm_stage_flow("sequence")
intents_flow = _llm_stage_flow("intents")
trace_tasks_flow = _llm_stage_flow("trace_tasks")
trace_worlds_flow = _llm_stage_flow("trace_worlds")
world_tasks_flow = _llm_stage_flow("world_tasks")
verify_flow = _llm_stage_flow("verify", first=("controls",))  # the judges' figures first
review_flow = _llm_stage_flow("review")
repair_flow = _llm_stage_flow("repair")


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
    push_to_hub: str | None = None,
) -> dict[str, Any]:
    """Write the next taskset version (or find it unchanged), its trainer projections
    (`formats`, else `[export] formats`), and push it to the Hugging Face Hub if asked."""
    with stage_context("export", home, config) as ctx:
        result = export_task(ctx, out, band, solver)
        summary = _export_summary(ctx, result, formats)
        if push_to_hub:
            summary["pushed_to"] = push_version(result.path, push_to_hub)
        return summary


@flow(name="pipeline")
def pipeline_flow(
    paths: list[str] | None = None,
    home: str | None = None,
    config: str | None = None,
    out: str | None = None,
    band: tuple[float, float] | None = None,
    repos: list[str] | None = None,
    traces: list[str] | None = None,
    max_tokens: int | None = None,
    max_cost_usd: float | None = None,
    overrides: dict[str, Any] | None = None,
    worlds: list[str] | None = None,
) -> dict[str, Any]:
    """Ingest `paths` (documents), `repos` (git repositories: paths or URLs), `traces`
    (production trace files) and `worlds` (tool world specs), or, when none is given and the
    lake is empty, the bundled samples of each; run every stage over what is not done yet, and
    export. `max_tokens` and `max_cost_usd` override the configured budget, `overrides` any
    setting (nested as in the file)."""
    return run_pipeline(
        paths, home, config, out, band, repos, traces, max_tokens, max_cost_usd, overrides, worlds
    )


def run_pipeline(
    paths: list[str] | None,
    home: str | None,
    config: str | None,
    out: str | None,
    band: tuple[float, float] | None,
    repos: list[str] | None,
    traces: list[str] | None,
    max_tokens: int | None,
    max_cost_usd: float | None,
    overrides: dict[str, Any] | None,
    worlds: list[str] | None = None,
) -> dict[str, Any]:
    """The pipeline flow's work, inside whichever flow calls it (so its tasks and artifacts
    belong to that flow's run)."""
    with stage_context("run", home, config, overrides) as ctx, ExitStack() as servers:
        if max_tokens is not None or max_cost_usd is not None:
            limits = ctx.config.budget
            ctx.budget = Budget(
                max_tokens if max_tokens is not None else limits.max_tokens,
                max_cost_usd if max_cost_usd is not None else limits.max_cost_usd,
            )
        summary: dict[str, Any] = {}
        empty = not any(ctx.lake.shards(table) for table in SOURCE_TABLES)
        if not paths and not repos and not traces and not worlds and empty:
            paths, repos, traces, worlds = (
                [str(SAMPLE_DOCS)],
                [str(_sample_repo(ctx, sample)) for sample in (LEDGERLINE, PARCELRATE)],
                [str(SAMPLE_TRACES)],
                [str(SAMPLE_WORLDS)],
            )
            ctx.progress(
                f"no sources yet: ingesting the bundled samples ({SAMPLE_DOCS},"
                f" {', '.join(repos)}, {SAMPLE_TRACES}, {SAMPLE_WORLDS})"
            )
        # a run that brings new sources has model work ahead: its servers are started and
        # checked first, so a server that cannot be used stops it before any stage runs
        resolved = (
            servers.enter_context(_model_servers(ctx))
            if paths or repos or traces or worlds
            else None
        )
        if paths:
            summary["ingest"] = ingest_task(paths, ctx)
        if traces:
            summary["ingest_traces"] = ingest_traces_task(traces, ctx)
        if worlds:
            summary["ingest_worlds"] = ingest_worlds_task(worlds, ctx)
        for origin in repos or []:
            summary.setdefault("ingest_repo", {})[origin] = ingest_repo_task(origin, None, ctx)
        if pending_replays(ctx):
            summary["replay"] = replay_task(ctx)
        if pending_rebuilds(ctx):
            summary["rebuild"] = rebuild_task(ctx)
        if pending_injections(ctx):
            summary["inject"] = inject_task(ctx)
        summary.update(run_llm_stages([s.name for s in llm_stages()], ctx, resolved))
        summary["export"] = _export_summary(ctx, export_task(ctx, out, band), None)
        summary["budget"] = ctx.budget.report()
        summary["usage"] = run_usage(ctx.lake, ctx.run_id)
        summary["funnel"] = funnel(ctx.lake)
        summary["artifacts"] = publish_run_artifacts(
            ctx, summary["export"], summary["funnel"]["stages"]
        )
        return summary


def _sample_repo(ctx: StageContext, sample: SampleRepo) -> Path:
    """A bundled sample repository, built under the home the first time."""
    path = ctx.config.home / "samples" / sample.name
    return path if (path / ".git").is_dir() else build_sample_repo(path, sample)
