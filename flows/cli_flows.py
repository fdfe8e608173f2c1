"""The `foundry` commands that run a Prefect flow: `run`, `ingest`, each stage, `calibrate`,
`export`, `train`, `evaluate`, `loop` and `judges variance`. Each is called under a Prefect API
(`flows/cli.py`) and imports the flows only when called, so that the commands that start no flow
never import Prefect."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from data.costs import Cost
from data.export import HUB_PREFIX
from flows.cli_args import EXIT_OK, EXIT_USAGE, band_of, run_sources
from sources import source_named


def _home(args: argparse.Namespace) -> dict:
    return {"home": args.home, "config": args.config}


def run(args: argparse.Namespace) -> int:
    """`foundry run`: the pipeline flow, then what it did."""
    from data.lake import per_task_text
    from flows import pipeline

    summary = pipeline.pipeline_flow(
        sources=run_sources(args),
        out=args.out,
        band=band_of(args.band),
        max_tokens=args.max_tokens,
        max_cost_usd=args.max_cost,
        overrides=_overrides(args),
        publish_gate=False,  # the gate is a scheduled run's: a terminal's run publishes
        **_home(args),
    )
    usage = summary["usage"]
    print(
        f"LLM calls this run: {usage['calls']} live, {usage['cache_hits']} from cache,"
        f" {usage['errors']} errors, {usage['tokens']} tokens,"
        f" {Cost.from_json(summary['cost']).text()}"
    )
    per_task = per_task_text(summary["funnel"]["cost"])
    if per_task:
        print(f"{per_task} (all runs)")
    for world in summary["funnel"]["worlds"]:
        if world["fidelity"] is not None:  # built from traces, its fidelity measured
            print(
                f"world from traces {world['world_id']}: fidelity {world['fidelity']:.2f}"
                f" ({world['written_by']}, {world['outcome']}), {world['tasks']} tasks"
            )
    _print_export(summary["export"])
    for line in summary["diagnosis"]:
        print(line)
    if summary["budget"]["exhausted"]:
        spent = summary["budget"]
        print(
            f"stopped at the budget: {spent['tokens']:,} tokens,"
            f" {Cost.from_json(spent).text()}; the rest is pending for the next run"
        )
    return EXIT_OK


def ingest(args: argparse.Namespace) -> int:
    """`foundry ingest NAME ITEM…`: the ingest flow on one source type's items."""
    from flows import pipeline

    source = source_named(args.kind)
    options = {o: getattr(args, o) for o in source.options if getattr(args, o) is not None}
    counts = pipeline.ingest_flow(
        source=source.name, items=args.items, options=options, **_home(args)
    )
    print(json.dumps(counts, indent=2))
    return EXIT_OK


def stage(name: str, args: argparse.Namespace) -> int:
    """`foundry <stage>`: the flow of the stage called `name`, its counts."""
    from flows import pipeline

    print(json.dumps(pipeline.stage_flow(name)(**_home(args)), indent=2))
    return EXIT_OK


def calibrate(args: argparse.Namespace) -> int:
    from flows import pipeline

    counts = pipeline.calibrate_flow(solver=args.solver, solver_url=args.solver_url, **_home(args))
    print(json.dumps(counts, indent=2))
    return EXIT_OK


def export(args: argparse.Namespace) -> int:
    from flows import pipeline

    summary = pipeline.export_flow(
        out=args.out,
        band=band_of(args.band),
        solver=args.solver,
        formats=args.formats,
        publish_to=f"{HUB_PREFIX}{args.push_to_hub}" if args.push_to_hub else args.publish_to,
        **_home(args),
    )
    _print_export(summary)
    return EXIT_OK


def train(args: argparse.Namespace) -> int:
    from flows.train import train_flow

    result = train_flow(
        taskset=args.taskset,
        model=args.model,
        smoke=args.smoke,
        steps=args.steps,
        out=args.out,
        judge=args.judge,
        audit=args.audit,
        learning_rate=args.learning_rate,
        shuffle_rewards=args.shuffle_rewards,
        completion_tokens=args.completion_tokens,
        in_band_only=args.in_band_only,
        **_home(args),
    )
    print(json.dumps(result, indent=2))
    return EXIT_OK


def evaluate(args: argparse.Namespace) -> int:
    from flows.evaluate import evaluate_flow

    def evaluation() -> dict:
        return evaluate_flow(
            taskset=args.taskset,
            policies=args.policy,
            split=args.split,
            attempts=args.attempts,
            limit=args.limit,
            **_home(args),
        )

    def table(result: dict) -> str:
        heading = f"{result['taskset']}, split {result['split']}: {result['tasks']} tasks"
        return f"{heading}\n{result['table']}"

    return _flow_output("evaluate", evaluation, args.json, table)


def loop(args: argparse.Namespace) -> int:
    from data.lake import format_rounds
    from flows.loop import loop_flow

    def rounds() -> dict:
        return loop_flow(
            rounds=args.rounds,
            policy=args.policy,
            trainer=args.trainer,
            given=args.given,
            name=args.name,
            attempts=args.attempts,
            steps=args.steps,
            learning_rate=args.learning_rate,
            completion_tokens=args.completion_tokens,
            **_home(args),
        )

    return _flow_output("loop", rounds, args.json, lambda result: format_rounds(result["rounds"]))


def judge_variance(args: argparse.Namespace) -> int:
    """`foundry judges variance`: open-book verdicts asked again with other seeds."""
    from flows import pipeline

    figures = pipeline.judge_variance_flow(
        tasks=args.tasks, seeds=args.seeds, temperature=args.temperature, **_home(args)
    )
    print(json.dumps(figures, indent=2))
    return EXIT_OK


def _flow_output(
    command: str, run: Callable[[], dict], as_json: bool, text: Callable[[dict], str]
) -> int:
    """Run a flow and print its result as JSON or as `text` says; a taskset or policy named
    wrong, or nothing to train on, is a usage error in one line."""
    try:
        result = run()
    except (ValueError, FileNotFoundError) as exc:
        print(f"foundry {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(result, indent=2, default=str) if as_json else text(result))
    return EXIT_OK


def _overrides(args: argparse.Namespace) -> dict | None:
    """`run`'s --kind, --since and --until as settings over the configured `[scope]`, and its
    --publish-to over `[export] publish_to`."""
    given = {"kinds": args.kind, "since": args.since, "until": args.until}
    scope = {key: value for key, value in given.items() if value is not None}
    overrides = {"scope": scope} if scope else {}
    if args.publish_to:
        overrides["export"] = {"publish_to": args.publish_to}
    return overrides or None


def _print_export(export: dict) -> None:
    state = "written" if export["written"] else "unchanged, same as latest"
    print(f"taskset: {export['path']} ({export['n_tasks']} tasks, {state})")
    for fmt, done in export["projections"].items():
        left_out = ", ".join(f"{k} {v}" for k, v in done["skipped"].items())
        note = f"; left out: {left_out}" if left_out else ""
        print(f"  {fmt}: {done['path']} ({done['rows']} rows{note})")
    published = export.get("published")
    if published:
        state = f"{published['files']} files sent" if published["written"] else "already there"
        print(f"published: {published['destination']} {published['version']} ({state})")
