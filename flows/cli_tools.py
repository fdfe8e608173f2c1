"""The `foundry` commands that start no flow: the funnel (`stats`), the report page, the
judges' report, the trace proxy, the Prefect deployments (`serve`), the red team, the taskset
diff, the curation page and `run --plan`. The command table (`flows/commands.py`) names them."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from data.runtime import interrupt
from flows.cli_args import EXIT_OK, EXIT_USAGE, QUIET_PREFECT, config_of, lake_of, run_sources


def proxy(args: argparse.Namespace) -> int:
    from data.lake import Lake
    from data.traces import scrubber_for
    from harnesses.proxy import require_key_off_loopback, serve

    try:
        require_key_off_loopback(args.host, args.access_key)
    except ValueError as exc:
        print(f"foundry proxy: {exc} (--access-key or $FOUNDRY_PROXY_KEY)", file=sys.stderr)
        return EXIT_USAGE
    cfg = config_of(args)
    lake = Lake(cfg.home)
    scrubber = None if args.raw else scrubber_for(cfg.traces)
    run_id = lake.start_run("proxy")
    state = "failed"
    print(f"proxy: http://{args.host}:{args.port}/v1 -> {args.upstream}", file=sys.stderr)
    try:
        serve(
            args.upstream,
            lake,
            run_id,
            api_key=args.api_key,
            host=args.host,
            port=args.port,
            scrubber=scrubber,
            access_key=args.access_key,
        )
        state = "completed"
    finally:
        lake.finish_run(run_id, state, {"upstream": args.upstream})
    return 0


def serve(args: argparse.Namespace) -> int:
    """Wait up to `--wait` seconds for the Prefect server at PREFECT_API_URL to answer, then
    serve the deployments until stopped (with `--pool`: register them for that pool and
    exit)."""
    import time

    import httpx

    api = os.environ.get("PREFECT_API_URL")
    if not api:
        print(
            "foundry serve needs a Prefect server: start one (`prefect server start`) and set"
            " PREFECT_API_URL=http://127.0.0.1:4200/api, or run `make ui`, which does both",
            file=sys.stderr,
        )
        return EXIT_USAGE
    deadline = time.monotonic() + args.wait
    while True:
        try:
            if httpx.get(f"{api.rstrip('/')}/health", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            print(f"foundry serve: no Prefect server answers at {api}", file=sys.stderr)
            return EXIT_USAGE
        time.sleep(1)
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    from flows.deployments import deploy_to_pool, serve_deployments

    cfg = config_of(args)
    if args.pool:
        for name in deploy_to_pool(cfg, args.config, args.pool):
            print(f"deployed {name}")
        return 0
    try:
        serve_deployments(cfg, args.config)
    except SystemExit as stop:
        # a SIGTERM in the moment after the deployments are listed and before Prefect's runner
        # has started: its handler exits with 0
        if stop.code not in (0, None):
            raise
    # serving returns only once stopped: by Ctrl-C (our handler: the flag is set; Prefect's
    # serve ends quietly on the KeyboardInterrupt) or by SIGTERM, which Prefect's runner takes
    # with a handler of its own for a graceful shutdown
    return interrupt.exit_code() if interrupt.requested() else 128 + signal.SIGTERM


def judges_report(args: argparse.Namespace) -> int:
    from judges.agreement import format_judge_report, judge_report

    report = judge_report(lake_of(args))
    print(json.dumps(report, indent=2) if args.json else format_judge_report(report))
    return 0


def redteam(args: argparse.Namespace) -> int:
    from data.runtime.sandbox import Limits
    from judges.redteam import answer_attacks
    from judges.redteam.run import attack_answers, attack_code, one_per_class, table
    from judges.redteam.targets import code_targets, verified_code_tasks, verified_tasks
    from judges.unit_tests import UnitTests

    lake = lake_of(args)
    mirrors = {r["repo_id"]: Path(r["mirror"]) for r in lake.rows("SELECT * FROM repos")}
    unit_tests = UnitTests(mirrors, Limits(wall_s=args.wall_s))
    targets, skipped = code_targets(verified_code_tasks(lake), unit_tests, args.every_task)
    rows = []
    for target, attacks in targets:
        print(f"redteam: {target.family} {target.name}: {len(attacks)} attacks", file=sys.stderr)
        rows += attack_code(target, one_per_class(attacks) if args.quick else attacks)
    answers = answer_attacks.ATTACKS
    rows += attack_answers(
        verified_tasks(lake, args.every_task), one_per_class(answers) if args.quick else answers
    )
    for why in skipped:
        print(f"not attacked: {why}")
    if not rows:
        print("foundry redteam: no verified task in the lake to attack (run `foundry run`)")
        return 1
    print(table(rows))
    return EXIT_OK if all(row.held for row in rows) else 1


def stats(args: argparse.Namespace) -> int:
    from data.costs import format_ledger, ledger_summary
    from data.lake import (
        cost_breakdown,
        evaluation_rows,
        format_breakdown,
        format_evaluations,
        format_funnel,
        format_gates,
        format_rounds,
        funnel,
        gate_rows,
        loop_rows,
    )
    from data.review import diagnose_latest
    from data.traces import format_trace_report, trace_report
    from families import stage_kinds
    from judges.agreement import format_judge_report, judge_report
    from judges.review_report import format_review_report, review_report

    lake = lake_of(args)
    summary = funnel(lake)
    summary["runs"] = len(lake.runs())
    summary["traces"] = trace_report(lake)
    summary["judges"] = judge_report(lake)
    summary["gates"] = gate_rows(lake)
    summary["review"] = review_report(lake)
    summary["evaluations"] = evaluation_rows(lake)
    summary["loop_rounds"] = loop_rows(lake)
    thin = diagnose_latest(lake, config_of(args), summary["stages"], stage_kinds())
    summary["diagnosis"] = thin.lines() if thin else []
    summary["cost_breakdown"] = cost_breakdown(lake, stage_kinds())
    recorded = {
        r["run_id"]: float(r["usd"] or 0)
        for r in lake.rows("SELECT run_id, sum(cost_usd) AS usd FROM llm_calls GROUP BY run_id")
    }
    summary["ledger"] = ledger_summary(lake.home, lake.runs(), recorded)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(f"lake: {lake.root} ({summary['runs']} runs)")
        print(format_funnel(summary))
        print()
        if summary["cost_breakdown"]["per_stage"]:
            print(format_breakdown(summary["cost_breakdown"]))
        print(format_ledger(summary["ledger"]))
        print()
        if summary["diagnosis"]:
            print("\n".join(summary["diagnosis"]))
            print()
        print(format_trace_report(summary["traces"]))
        print()
        print(format_judge_report(summary["judges"]))
        print()
        print(format_gates(summary["gates"]))
        print()
        print(format_review_report(summary["review"]))
        print()
        print(format_evaluations(summary["evaluations"]))
        print()
        print(format_rounds(summary["loop_rounds"]))
    return 0


def report(args: argparse.Namespace) -> int:
    from data.export import taskset_version
    from data.lake import Lake
    from data.review import render_report, write_report
    from families import stage_kinds

    cfg = config_of(args)
    try:
        version = taskset_version(Path(args.taskset or cfg.home / "tasksets" / cfg.export.name))
    except FileNotFoundError as exc:
        if args.taskset:
            print(f"foundry report: {exc}", file=sys.stderr)
            return EXIT_USAGE
        version = None  # nothing exported yet: the page says so
    report = render_report(Lake(cfg.home), version, cfg, made_by=stage_kinds())
    path = write_report(report, Path(args.out))
    shown = f"taskset {version} ({report.n_tasks} tasks)" if version else "no exported taskset"
    plots = ", ".join(p.removeprefix("plot-") for p in report.plots) or "none"
    print(f"report: {path}")
    print(f"  {shown}; plots: {plots}")
    return 0


def diff(args: argparse.Namespace) -> int:
    """Compare two versions of a taskset: by default the latest with the one before, with one
    version named that one with the latest."""
    from data.export import named_version, taskset_versions
    from data.review import diff_versions, format_diff

    cfg = config_of(args)
    tasksets = cfg.home / "tasksets"
    versions = taskset_versions(tasksets / cfg.export.name)
    try:
        named = [named_version(v, tasksets, cfg.export.name) for v in args.versions]
    except FileNotFoundError as exc:
        print(f"foundry diff: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if len(named) == 2:
        pair = named
    elif len(named) == 1:
        pair = [named[0], versions[-1]] if versions else []
    else:
        pair = versions[-2:]
    if len(named) > 2 or len(pair) < 2 or pair[0].resolve() == pair[1].resolve():
        print(
            f"foundry diff: compares two different versions ({tasksets / cfg.export.name} has"
            f" {len(versions)}); name them: `foundry diff v0001 v0002`",
            file=sys.stderr,
        )
        return EXIT_USAGE
    result = diff_versions(*pair, lake_of(args))
    print(json.dumps(result.to_json(), indent=2, default=str) if args.json else format_diff(result))
    return EXIT_OK


def curate(args: argparse.Namespace) -> int:
    """Serve the curation page until interrupted."""
    import getpass

    from data.review import CurationServer

    reviewer = args.reviewer or os.environ.get("FOUNDRY_REVIEWER") or getpass.getuser()
    server = CurationServer(lake_of(args), reviewer, args.host, args.port)
    print(f"curation: {server.url} (reviewing as {reviewer}; Ctrl-C stops)", flush=True)
    with interrupt.stop_on_signals():
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return EXIT_OK


def plan(args: argparse.Namespace) -> int:
    """`foundry run --plan`: the run's estimate, then exit (no model is called)."""
    from data.config import with_overrides
    from data.plan import format_plan
    from flows.run_plan import estimate_run

    config = config_of(args)
    scope = {"scope": {"kinds": args.kind}} if args.kind else None
    estimate = estimate_run(run_sources(args), with_overrides(config, scope) if scope else config)
    print(json.dumps(estimate.to_json(), indent=2) if args.json else format_plan(estimate))
    return EXIT_OK
