"""The `foundry` command line.

Exit status: 0 when what could be done was done (items rejected for their content are not
failures); 1 on an unexpected error; 2 for a usage or configuration error (a cost limit on a
run that calls a model with no price included); 3 when a model server the run needs could not
be used; 4 when every LLM call of the run failed; 130 / 143 when stopped by SIGINT / SIGTERM
(what finished is kept, and the next run resumes the rest); 141 when the reader of its output
went away (`foundry stats | head`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable

from data.config import ConfigError
from data.costs import Cost
from data.embedded import EmbeddedModelError
from data.publish import HUB_PREFIX
from data.records import utcnow
from data.runtime import interrupt
from flows import cli_tools
from flows.cli_args import (
    EXIT_ALL_CALLS_FAILED,
    EXIT_BROKEN_PIPE,
    EXIT_MODEL_SERVER,
    EXIT_OK,
    EXIT_USAGE,
    QUIET_PREFECT,
    band_of,
    build_parser,
    config_of,
    lake_of,
)
from flows.stages import command_stages, llm_stages
from flows.stops import ended_by_stop
from sources import REGISTERED as SOURCES
from sources import bare as bare_source
from sources import source_named

# commands that call model servers: their runs are checked for "every call failed"
LLM_COMMANDS = frozenset(
    {"run", "calibrate", "judges", "evaluate", "loop"}
    | {stage.name.replace("_", "-") for stage in llm_stages() if stage.help}
)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    started = utcnow()
    with interrupt.stop_on_signals():
        try:
            code = _dispatch(args)
            sys.stdout.flush()  # a reader gone shows here, not after the exit status is set
        except (ConfigError, argparse.ArgumentTypeError) as exc:
            print(f"foundry: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except BrokenPipeError:  # the reader went away (`foundry stats | head`): say no more
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_BROKEN_PIPE
        except BaseException as exc:
            if _is_model_server_error(exc):
                print(f"foundry: {exc}", file=sys.stderr)
                return EXIT_MODEL_SERVER
            if not ended_by_stop(exc):
                raise
            interrupt.request(getattr(exc, "signal", signal.SIGINT))  # (set unless Prefect's)
            print(
                "foundry: stopped; what finished is kept in the lake, and the next run resumes"
                " the rest",
                file=sys.stderr,
            )
            return interrupt.exit_code()
    if code == EXIT_OK and args.command in LLM_COMMANDS:
        return _check_llm_calls(args, started)
    return code


def _is_model_server_error(exc: BaseException) -> bool:
    from data.model_servers import EndpointError

    return isinstance(exc, EmbeddedModelError | EndpointError)


def _check_llm_calls(args: argparse.Namespace, since) -> int:
    """EXIT_ALL_CALLS_FAILED, with the reasons counted, when the runs this command made
    called model servers and every call failed; else EXIT_OK."""
    from data.funnel import failed_calls

    lake = lake_of(args)
    runs = [r["run_id"] for r in lake.runs() if r["started_at"] >= since]
    failed = failed_calls(lake, runs)
    if failed is None:
        return EXIT_OK
    reasons = ", ".join(f"{reason} x{n}" for reason, n in failed.items())
    print(
        f"foundry: every LLM call of this run failed ({reasons}); see `foundry stats` and the"
        " model server's log",
        file=sys.stderr,
    )
    return EXIT_ALL_CALLS_FAILED


def _dispatch(args: argparse.Namespace) -> int:
    """Run the command `args` names; its exit status."""
    band = band_of(getattr(args, "band", None))
    named = f"judges {args.judges_command}" if args.command == "judges" else args.command
    if named in cli_tools.COMMANDS:
        return cli_tools.COMMANDS[named](args)
    if args.command == "run" and args.plan:
        return cli_tools.plan(args, _run_sources(args))
    from data.price_check import check_config
    from flows.stages import check_kinds

    config = config_of(args)  # a configuration error is said before any flow starts
    check_kinds((args.kind if args.command == "run" else None) or config.scope.kinds)
    if args.command in LLM_COMMANDS:  # a cost limit needs every configured model's price
        given = getattr(args, "max_cost", None)
        check_config(config, given if given is not None else config.budget.max_cost_usd)
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    # Prefect is imported only for commands that run flows
    from flows.prefect_server import prefect_api
    from flows.quiet_errors import drop_reported_errors

    drop_reported_errors()
    with prefect_api():
        return _run_flows(args, band)


def _run_sources(args: argparse.Namespace) -> dict[str, list[str]]:
    """`foundry run`'s items by source type: its `--NAME` flags and its bare paths."""
    sources = {source.name: list(getattr(args, source.name)) for source in SOURCES}
    sources[bare_source().name] += args.paths
    return sources


def _run_flows(args: argparse.Namespace, band: tuple[float, float] | None) -> int:
    """Run the flow command `args` names, reporting to the Prefect API; its exit status."""
    from data.funnel import per_task_text
    from flows import pipeline

    common = {"home": args.home, "config": args.config}
    if args.command == "run":
        summary = pipeline.pipeline_flow(
            sources=_run_sources(args),
            out=args.out,
            band=band,
            max_tokens=args.max_tokens,
            max_cost_usd=args.max_cost,
            overrides=_overrides(args),
            publish_gate=False,  # the gate is a scheduled run's: a terminal's run publishes
            **common,
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
    elif args.command == "ingest":
        source = source_named(args.kind)
        options = {o: getattr(args, o) for o in source.options if getattr(args, o) is not None}
        counts = pipeline.ingest_flow(
            source=source.name, items=args.items, options=options, **common
        )
        print(json.dumps(counts, indent=2))
    elif args.command.replace("-", "_") in {stage.name for stage in command_stages()}:
        flow = pipeline.stage_flow(args.command.replace("-", "_"))
        print(json.dumps(flow(**common), indent=2))
    elif args.command == "calibrate":
        counts = pipeline.calibrate_flow(solver=args.solver, solver_url=args.solver_url, **common)
        print(json.dumps(counts, indent=2))
    elif args.command == "export":
        summary = pipeline.export_flow(
            out=args.out,
            band=band,
            solver=args.solver,
            formats=args.formats,
            publish_to=f"{HUB_PREFIX}{args.push_to_hub}" if args.push_to_hub else args.publish_to,
            **common,
        )
        _print_export(summary)
    elif args.command == "train":
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
            **common,
        )
        print(json.dumps(result, indent=2))
    elif args.command == "loop":
        return _loop(args, common)
    elif args.command == "evaluate":
        from flows.evaluate import evaluate_flow

        def evaluate() -> dict:
            return evaluate_flow(
                taskset=args.taskset,
                policies=args.policy,
                split=args.split,
                attempts=args.attempts,
                limit=args.limit,
                **common,
            )

        def table(result: dict) -> str:
            heading = f"{result['taskset']}, split {result['split']}: {result['tasks']} tasks"
            return f"{heading}\n{result['table']}"

        return _flow_output("evaluate", evaluate, args.json, table)
    elif args.command == "judges":
        figures = pipeline.judge_variance_flow(
            tasks=args.tasks, seeds=args.seeds, temperature=args.temperature, **common
        )
        print(json.dumps(figures, indent=2))
    return 0


def _loop(args: argparse.Namespace, common: dict) -> int:
    from data.loop_rounds import format_rounds
    from flows.loop import loop_flow

    def loop() -> dict:
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
            **common,
        )

    return _flow_output("loop", loop, args.json, lambda result: format_rounds(result["rounds"]))


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


if __name__ == "__main__":
    sys.exit(main())
