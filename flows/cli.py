"""The `foundry` command line.

Exit status: 0 when what could be done was done (items rejected for their content are not
failures); 1 on an unexpected error; 2 for a usage or configuration error; 3 when a model server
the run needs could not be used; 4 when every LLM call of the run failed; 130 / 143 when stopped
by SIGINT / SIGTERM (what finished is kept, and the next run resumes the rest).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import get_args

from data.config import ConfigError, ExportFormat
from data.embedded import EmbeddedModelError
from data.records import utcnow
from data.runtime import interrupt

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_MODEL_SERVER = 3
EXIT_ALL_CALLS_FAILED = 4
# commands that call model servers: their runs are checked for "every call failed"
LLM_COMMANDS = frozenset(
    {
        "run", "generate", "describe", "sequence", "intents", "trace-tasks", "trace-worlds",
        "world-tasks", "verify", "review", "repair", "calibrate", "judges", "evaluate", "loop",
    }
)  # fmt: skip

QUIET_PREFECT = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "60",
    "TOKENIZERS_PARALLELISM": "false",
}


def _band(values: list[str] | None) -> tuple[float, float] | None:
    if values is None:
        return None
    low, high = (float(v) for v in values)
    if not 0 <= low <= high <= 1:
        raise argparse.ArgumentTypeError(f"--band needs 0 <= LO <= HI <= 1, got {low} {high}")
    return low, high


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="data folder (default $FOUNDRY_HOME or ./.foundry)")
    common.add_argument("--config", help="foundry.toml to use")
    parser = argparse.ArgumentParser(
        prog="foundry", description="Verifiable RL tasksets from your documents."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", parents=[common], help="ingest PATHs, run every stage, export")
    run.add_argument("paths", nargs="*", help="documents or folders (default: bundled samples)")
    run.add_argument(
        "--repo", action="append", default=[], help="also a git repository: path or URL"
    )
    run.add_argument(
        "--traces", action="append", default=[], help="also production traces: file or folder"
    )
    run.add_argument(
        "--worlds", action="append", default=[], help="also tool world specs: file or folder"
    )
    run.add_argument("--out", help="export under this folder instead of $FOUNDRY_HOME/tasksets")
    run.add_argument("--band", nargs=2, metavar=("LO", "HI"), help="export only LO<=p<=HI")
    run.add_argument("--max-tokens", type=int, help="stop at this many live LLM tokens")
    run.add_argument("--max-cost", type=float, help="stop at this LLM cost in USD")
    run.add_argument(
        "--kind",
        action="append",
        help="make only this task kind, one a registered family makes (repeatable; default:"
        " every kind)",
    )
    run.add_argument(
        "--since", type=date.fromisoformat, help="only commits and traces from this day (UTC)"
    )
    run.add_argument(
        "--until", type=date.fromisoformat, help="only commits and traces up to this day (UTC)"
    )

    ingest = sub.add_parser("ingest", help="add sources to the lake")
    kinds = ingest.add_subparsers(dest="kind", required=True)
    docs = kinds.add_parser(
        "docs",
        parents=[common],
        help="documents (.md .txt .html .pdf .docx .pptx .xlsx .csv .epub .ipynb .rst .adoc)"
        " or folders",
    )
    docs.add_argument("paths", nargs="+")
    repo = kinds.add_parser("repo", parents=[common], help="a git repository: path or URL")
    repo.add_argument("origin", help="a local repository or a git URL")
    repo.add_argument("--rev", help="a git rev-list range, e.g. v1.0..main (default: HEAD)")
    traces = kinds.add_parser(
        "traces",
        parents=[common],
        help="production traces: OpenAI-style JSONL, OTel GenAI spans (JSON), proxy records",
    )
    traces.add_argument("paths", nargs="+", help="files or folders (.jsonl .json .parquet)")
    worlds = kinds.add_parser(
        "worlds", parents=[common], help="simulated tool worlds: world spec files (.toml .json)"
    )
    worlds.add_argument("paths", nargs="+", help="files or folders (.toml .json)")

    for name, text in (
        ("generate", "write candidate tasks from chunks"),
        ("verify", "judge candidates: answerable with source, not without"),
        ("review", "rubrics from failed attempts; mine and remedy reward hacks"),
        ("repair", "move out-of-band tasks one difficulty level toward the band"),
        ("replay", "run ingested commits' tests in the sandbox: fail-to-pass, pass-to-pass"),
        ("describe", "write commit-replay tasks: a statement for each replayed commit"),
        ("rebuild", "function-rebuild tasks: take covered functions' bodies out, in the sandbox"),
        ("inject", "bug-fix tasks: put a bug into covered functions, kept where tests fail"),
        ("sequence", "commit-sequence tasks: consecutive described commits as ordered steps"),
        ("intents", "cluster the traces' requests and name each cluster's intent"),
        ("trace-tasks", "rate traces with the judge panel and turn them into tasks"),
        ("trace-worlds", "build tool worlds from the traces' tool calls; score their fidelity"),
        ("world-tasks", "plant tool-use tasks on the worlds: gold calls and final state"),
    ):
        sub.add_parser(name, parents=[common], help=text)
    calibrate = sub.add_parser(
        "calibrate", parents=[common], help="measure solver pass rates and bands"
    )
    calibrate.add_argument(
        "--solver", help="re-calibrate every verified task against this model, kept beside"
    )
    calibrate.add_argument("--solver-url", help="its server (default: the configured solver's)")

    export = sub.add_parser("export", parents=[common], help="write a taskset version")
    export.add_argument("--out", help="export under this folder instead of $FOUNDRY_HOME/tasksets")
    export.add_argument("--band", nargs=2, metavar=("LO", "HI"), help="export only LO<=p<=HI")
    export.add_argument("--solver", help="use this model's re-calibration (foundry calibrate)")
    export.add_argument(
        "--format",
        action="append",
        choices=get_args(ExportFormat),
        dest="formats",
        help="also write this trainer projection (repeatable; default: [export] formats):"
        " trl (GRPOTrainer), verifiers (classic columns + v1 taskset package),"
        " prime-rl (rl.toml source), sft (accepted rollouts as messages)",
    )
    export.add_argument(
        "--push-to-hub", metavar="REPO", help="push the version to this Hugging Face dataset repo"
    )

    train = sub.add_parser(
        "train", parents=[common], help="GRPO-train a policy on a taskset (TRL), its rewards"
    )
    train.add_argument("--taskset", required=True, help="a taskset folder or one of its versions")
    train.add_argument(
        "--model", default="embedded", help="policy: embedded (SmolLM2-135M), a folder or hub id"
    )
    train.add_argument(
        "--smoke", action="store_true", help="one CPU step, one task per environment: the wiring"
    )
    train.add_argument("--steps", type=int, help="training steps (default 200)")
    train.add_argument(
        "--learning-rate", type=float, help="instead of the default (1e-6 on CPU and GPU)"
    )
    train.add_argument(
        "--completion-tokens",
        type=int,
        metavar="N",
        help="longest completion (default 512 on CPU; short answers train faster with less)",
    )
    train.add_argument(
        "--shuffle-rewards",
        action="store_true",
        help="control run: each step's rewards permuted across its completions",
    )
    train.add_argument(
        "--in-band-only",
        action="store_true",
        help="train only on the tasks calibration put in the band (the rest teach nothing)",
    )
    train.add_argument("--out", help="output folder (default $FOUNDRY_HOME/train/NAME-VERSION)")
    train.add_argument(
        "--judge", action="store_true", help="also reward judged verifiers with the judge panel"
    )
    train.add_argument(
        "--audit",
        type=int,
        default=8,
        metavar="N",
        help="rewarded completions the judge panel audits for reward hacks (default 8; 0: none)",
    )

    evaluate = sub.add_parser(
        "evaluate",
        parents=[common],
        help="policies' pass rates on a taskset's held-out split, each task in its environment",
    )
    evaluate.add_argument("taskset", help="a taskset folder or one of its versions")
    evaluate.add_argument(
        "--policy",
        action="append",
        required=True,
        metavar="POLICY",
        help="embedded, a model folder (e.g. what foundry train saved), MODEL@URL, or a model"
        " on the solver's server; give two or more for a before/after table (the first is the"
        " baseline)",
    )
    evaluate.add_argument("--split", default="eval", help="train or eval (default eval)")
    evaluate.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="the split's first N tasks by id only (a quick look; compare like with like)",
    )
    evaluate.add_argument("--json", action="store_true", help="machine-readable output")
    evaluate.add_argument(
        "--attempts", type=int, default=4, metavar="K", help="attempts per task (default 4)"
    )

    loop = sub.add_parser(
        "loop",
        parents=[common],
        help="rounds of export, train, held-out evaluation, re-measure and steering by the"
        " new policy's failures",
    )
    loop.add_argument("--rounds", type=int, default=2, help="rounds to have run (default 2)")
    loop.add_argument(
        "--policy",
        default="embedded",
        help="round 1's policy: embedded, a model folder, or with --trainer given MODEL@URL",
    )
    loop.add_argument(
        "--trainer",
        choices=("grpo", "deployment", "given"),
        default="grpo",
        help="grpo: train here (foundry train); deployment: the train deployment, on its own"
        " work pool; given: no training, each round's policy is the next --given",
    )
    loop.add_argument(
        "--given",
        action="append",
        default=[],
        metavar="POLICY",
        help="with --trainer given: the policy round N makes (repeat, one per round)",
    )
    loop.add_argument(
        "--name", default="loop", help="the loop's name: its taskset is <export name>-<name>"
    )
    loop.add_argument(
        "--attempts", type=int, default=4, metavar="K", help="attempts per eval task (default 4)"
    )
    loop.add_argument("--steps", type=int, help="training steps per round")
    loop.add_argument("--learning-rate", type=float, help="the training's learning rate")
    loop.add_argument(
        "--completion-tokens", type=int, metavar="N", help="the training's longest completion"
    )
    loop.add_argument("--json", action="store_true", help="machine-readable output")

    judges = sub.add_parser("judges", help="judge quality figures")
    judge_commands = judges.add_subparsers(dest="judges_command", required=True)
    report = judge_commands.add_parser(
        "report", parents=[common], help="agreement, kappa, errors, seed variance"
    )
    report.add_argument("--json", action="store_true", help="machine-readable output")
    variance = judge_commands.add_parser(
        "variance", parents=[common], help="re-ask open-book verdicts with other seeds"
    )
    variance.add_argument("--tasks", type=int, default=20, help="how many judged tasks")
    variance.add_argument("--seeds", type=int, default=2, help="other seeds per verdict")
    variance.add_argument(
        "--temperature", type=float, help="sample the judges at this temperature instead"
    )

    proxy = sub.add_parser(
        "proxy", parents=[common], help="record every call to an OpenAI-compatible server"
    )
    proxy.add_argument("--upstream", required=True, help="the server's base URL (…/v1)")
    proxy.add_argument("--port", type=int, default=8400)
    proxy.add_argument("--host", default="127.0.0.1")
    proxy.add_argument(
        "--access-key",
        default=os.environ.get("FOUNDRY_PROXY_KEY"),
        help="the key clients must send as X-Proxy-Key (default $FOUNDRY_PROXY_KEY); needed"
        " when --host is not loopback",
    )
    proxy.add_argument(
        "--api-key", help="key for the upstream (else each client's own key is forwarded)"
    )
    proxy.add_argument(
        "--raw",
        action="store_true",
        help="record calls as they are (default: secrets and personal data scrubbed first,"
        " as [traces] configures)",
    )

    serve = sub.add_parser(
        "serve",
        parents=[common],
        help="register and serve the nightly and adhoc deployments on a Prefect server",
    )
    serve.add_argument(
        "--wait", type=float, default=120.0, help="seconds to wait for the server to answer"
    )
    serve.add_argument(
        "--pool",
        help="register the deployments for this work pool and exit: its workers (`prefect"
        " worker start --pool NAME`, on any host with this checkout at the same path) run them",
    )

    redteam = sub.add_parser(
        "redteam",
        parents=[common],
        help="attack the graders of the lake's verified tasks (Python code, answers, reports,"
        " tool calls): every attack must score 0 and be shown to have run (exit 1 otherwise)",
    )
    redteam.add_argument(
        "--every-task", action="store_true", help="every task (default: one per family)"
    )
    redteam.add_argument("--quick", action="store_true", help="one attack of each class")
    redteam.add_argument(
        "--wall-s", type=float, default=30.0, help="each sandboxed run's time limit (default 30)"
    )

    stats = sub.add_parser("stats", parents=[common], help="the funnel with rejection reasons")
    stats.add_argument("--json", action="store_true", help="machine-readable output")

    page = sub.add_parser(
        "report",
        parents=[common],
        help="a static HTML page: funnel, difficulty, judge agreement, cost, sample tasks",
    )
    page.add_argument("--out", required=True, help="the HTML file to write")
    page.add_argument(
        "--taskset",
        help="a taskset folder or one of its versions (default: the configured taskset's latest)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    started = utcnow()
    with interrupt.stop_on_signals():
        try:
            code = _dispatch(args)
        except (ConfigError, argparse.ArgumentTypeError) as exc:
            print(f"foundry: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except BaseException as exc:
            if _is_model_server_error(exc):
                print(f"foundry: {exc}", file=sys.stderr)
                return EXIT_MODEL_SERVER
            if not _is_stop(exc) and not interrupt.requested():
                raise  # (after a stop request, what failed was cut short by it)
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


def _is_stop(exc: BaseException) -> bool:
    """Ctrl-C or SIGTERM: our handler's KeyboardInterrupt, or the TerminationSignal Prefect's
    own SIGTERM handler raises inside a flow run."""
    if isinstance(exc, KeyboardInterrupt | interrupt.Interrupted):
        return True
    prefect_exceptions = sys.modules.get("prefect.exceptions")
    return prefect_exceptions is not None and isinstance(exc, prefect_exceptions.TerminationSignal)


def _is_model_server_error(exc: BaseException) -> bool:
    from data.model_servers import EndpointError

    return isinstance(exc, EmbeddedModelError | EndpointError)


def _check_llm_calls(args: argparse.Namespace, since) -> int:
    """EXIT_ALL_CALLS_FAILED, with the reasons counted, when the runs this command made
    called model servers and every call failed; else EXIT_OK."""
    from data.funnel import failed_calls

    lake = _lake(args)
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
    band = _band(getattr(args, "band", None))
    if args.command == "stats":
        return _stats(args)
    if args.command == "report":
        return _report(args)
    if args.command == "judges" and args.judges_command == "report":
        return _judges_report(args)
    if args.command == "proxy":
        return _proxy(args)
    if args.command == "serve":
        return _serve(args)
    if args.command == "redteam":
        return _redteam(args)
    from flows.stages import check_kinds

    config = _config(args)  # a configuration error is said before any flow starts
    check_kinds((args.kind if args.command == "run" else None) or config.scope.kinds)
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    # Prefect is imported only for commands that run flows
    from flows.prefect_server import prefect_api
    from flows.quiet_errors import drop_reported_errors

    drop_reported_errors()
    with prefect_api():
        return _run_flows(args, band)


def _run_flows(args: argparse.Namespace, band: tuple[float, float] | None) -> int:
    """Run the flow command `args` names, reporting to the Prefect API; its exit status."""
    from flows import pipeline

    common = {"home": args.home, "config": args.config}
    if args.command == "run":
        summary = pipeline.pipeline_flow(
            paths=args.paths,
            repos=args.repo,
            traces=args.traces,
            worlds=args.worlds,
            out=args.out,
            band=band,
            max_tokens=args.max_tokens,
            max_cost_usd=args.max_cost,
            overrides=_scope(args),
            **common,
        )
        usage = summary["usage"]
        print(
            f"LLM calls this run: {usage['calls']} live, {usage['cache_hits']} from cache,"
            f" {usage['errors']} errors, {usage['tokens']} tokens"
        )
        cost = summary["funnel"]["cost"]
        if cost["accepted_tasks"]:
            per_task = cost["tokens_per_accepted_task"]
            print(
                f"per accepted task (all runs, {cost['accepted_tasks']} tasks):"
                f" ${cost['usd_per_accepted_task']:.4f}, {per_task:,} tokens"
            )
        for world in summary["funnel"]["worlds"]:
            if world["origin"] == "traces":
                print(
                    f"world from traces {world['world_id']}: fidelity {world['fidelity']:.2f}"
                    f" ({world['written_by']}, {world['outcome']}), {world['tasks']} tasks"
                )
        _print_export(summary["export"])
        if summary["budget"]["exhausted"]:
            spent = summary["budget"]
            print(
                f"stopped at the budget: {spent['tokens']:,} tokens, ${spent['cost_usd']:.4f};"
                " the rest is pending for the next run"
            )
    elif args.command == "ingest" and args.kind == "repo":
        counts = pipeline.ingest_repo_flow(origin=args.origin, rev=args.rev, **common)
        print(json.dumps(counts, indent=2))
    elif args.command == "ingest" and args.kind == "traces":
        print(json.dumps(pipeline.ingest_traces_flow(paths=args.paths, **common), indent=2))
    elif args.command == "ingest" and args.kind == "worlds":
        print(json.dumps(pipeline.ingest_worlds_flow(paths=args.paths, **common), indent=2))
    elif args.command == "ingest":
        print(json.dumps(pipeline.ingest_flow(paths=args.paths, **common), indent=2))
    elif args.command in (
        "generate",
        "describe",
        "sequence",
        "intents",
        "trace-tasks",
        "trace-worlds",
        "world-tasks",
        "verify",
        "review",
        "repair",
        "replay",
        "rebuild",
        "inject",
    ):
        flow = getattr(pipeline, f"{args.command.replace('-', '_')}_flow")
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
            push_to_hub=args.push_to_hub,
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


def _scope(args: argparse.Namespace) -> dict | None:
    """`run`'s --kind, --since and --until as settings over the configured `[scope]`."""
    given = {"kinds": args.kind, "since": args.since, "until": args.until}
    scope = {key: value for key, value in given.items() if value is not None}
    return {"scope": scope} if scope else None


def _print_export(export: dict) -> None:
    state = "written" if export["written"] else "unchanged, same as latest"
    print(f"taskset: {export['path']} ({export['n_tasks']} tasks, {state})")
    for fmt, done in export["projections"].items():
        left_out = ", ".join(f"{k} {v}" for k, v in done["skipped"].items())
        note = f"; left out: {left_out}" if left_out else ""
        print(f"  {fmt}: {done['path']} ({done['rows']} rows{note})")
    if export.get("pushed_to"):
        print(f"pushed to the Hub: {export['pushed_to']}")


def _config(args: argparse.Namespace):
    from data.config import load_config

    return load_config(Path(args.config) if args.config else None, _home(args))


def _lake(args: argparse.Namespace):
    from data.lake import Lake

    return Lake(_config(args).home)


def _proxy(args: argparse.Namespace) -> int:
    from data.lake import Lake
    from data.trace_ingest import scrubber_for
    from harnesses.proxy import require_key_off_loopback, serve

    try:
        require_key_off_loopback(args.host, args.access_key)
    except ValueError as exc:
        print(f"foundry proxy: {exc} (--access-key or $FOUNDRY_PROXY_KEY)", file=sys.stderr)
        return 2
    cfg = _config(args)
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


def _serve(args: argparse.Namespace) -> int:
    """Wait for the Prefect server at PREFECT_API_URL, then serve the deployments."""
    import time

    import httpx

    api = os.environ.get("PREFECT_API_URL")
    if not api:
        print(
            "foundry serve needs a Prefect server: start one (`prefect server start`) and set"
            " PREFECT_API_URL=http://127.0.0.1:4200/api, or run `make ui`, which does both",
            file=sys.stderr,
        )
        return 2
    deadline = time.monotonic() + args.wait
    while True:
        try:
            if httpx.get(f"{api.rstrip('/')}/health", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            print(f"foundry serve: no Prefect server answers at {api}", file=sys.stderr)
            return 2
        time.sleep(1)
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    from flows.deployments import deploy_to_pool, serve_deployments

    cfg = _config(args)
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


def _home(args: argparse.Namespace) -> Path | None:
    return Path(args.home).resolve() if args.home else None


def _judges_report(args: argparse.Namespace) -> int:
    from judges.agreement import format_judge_report, judge_report

    report = judge_report(_lake(args))
    print(json.dumps(report, indent=2) if args.json else format_judge_report(report))
    return 0


def _redteam(args: argparse.Namespace) -> int:
    from data.runtime.sandbox import Limits
    from judges.redteam import answer_attacks
    from judges.redteam.run import attack_answers, attack_code, one_per_class, table
    from judges.redteam.targets import code_targets, verified_code_tasks, verified_tasks
    from judges.unit_tests import UnitTests

    lake = _lake(args)
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


def _stats(args: argparse.Namespace) -> int:
    from data.evaluations import evaluation_rows, format_evaluations
    from data.funnel import format_funnel, funnel
    from data.gates import format_gates, gate_rows
    from data.loop_rounds import format_rounds, loop_rows
    from data.trace_report import format_trace_report, trace_report
    from judges.agreement import format_judge_report, judge_report
    from judges.review_report import format_review_report, review_report

    lake = _lake(args)
    summary = funnel(lake)
    summary["runs"] = len(lake.runs())
    summary["traces"] = trace_report(lake)
    summary["judges"] = judge_report(lake)
    summary["gates"] = gate_rows(lake)
    summary["review"] = review_report(lake)
    summary["evaluations"] = evaluation_rows(lake)
    summary["loop_rounds"] = loop_rows(lake)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(f"lake: {lake.root} ({summary['runs']} runs)")
        print(format_funnel(summary))
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


def _report(args: argparse.Namespace) -> int:
    from data.export import taskset_version
    from data.lake import Lake
    from data.report import render_report, write_report

    cfg = _config(args)
    try:
        version = taskset_version(Path(args.taskset or cfg.home / "tasksets" / cfg.export.name))
    except FileNotFoundError as exc:
        if args.taskset:
            print(f"foundry report: {exc}", file=sys.stderr)
            return 2
        version = None  # nothing exported yet: the page says so
    report = render_report(Lake(cfg.home), version)
    path = write_report(report, Path(args.out))
    shown = f"taskset {version} ({report.n_tasks} tasks)" if version else "no exported taskset"
    plots = ", ".join(p.removeprefix("plot-") for p in report.plots) or "none"
    print(f"report: {path}")
    print(f"  {shown}; plots: {plots}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
