"""The `foundry` command line's arguments: the parser of every command, the settings, home and
lake the arguments name, and the exit statuses."""

from __future__ import annotations

import argparse
import os
from datetime import date
from pathlib import Path

from data.projections import REGISTERED as PROJECTIONS
from flows.stages import command_stages
from sources import REGISTERED as SOURCES
from sources import bare as bare_source

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_MODEL_SERVER = 3
EXIT_ALL_CALLS_FAILED = 4
# the environment a command that runs flows or serves deployments sets (unless already set)
QUIET_PREFECT = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "60",
    "TOKENIZERS_PARALLELISM": "false",
}


def band_of(values: list[str] | None) -> tuple[float, float] | None:
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
    for source in SOURCES:
        flags = [f"--{name}" for name in (source.name, *source.aliases)]
        run.add_argument(
            *flags, dest=source.name, action="append", default=[], help=f"also {source.items}"
        )
    bare = bare_source()
    run.add_argument(
        "paths", nargs="*", help=f"{bare.items}, as --{bare.name} (default: bundled samples)"
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
    types = ingest.add_subparsers(dest="kind", required=True)
    for source in SOURCES:
        reader = types.add_parser(
            source.name, aliases=list(source.aliases), parents=[common], help=source.help
        )
        reader.add_argument("items", nargs="+", help=source.items)
        for option, text in source.options.items():
            reader.add_argument(f"--{option}", help=text)
    for stage in command_stages():
        sub.add_parser(stage.name.replace("_", "-"), parents=[common], help=stage.help)
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
        choices=[p.name for p in PROJECTIONS],
        dest="formats",
        help="also write this trainer projection (repeatable; default: [export] formats): "
        + ", ".join(f"{p.name} ({p.help})" for p in PROJECTIONS),
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


def config_of(args: argparse.Namespace):
    from data.config import load_config

    return load_config(Path(args.config) if args.config else None, home_of(args))


def lake_of(args: argparse.Namespace):
    from data.lake import Lake

    return Lake(config_of(args).home)


def home_of(args: argparse.Namespace) -> Path | None:
    return Path(args.home).resolve() if args.home else None
