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
EXIT_BROKEN_PIPE = 141  # as a shell reports a command that SIGPIPE ended
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


def home_options(default: object = None) -> argparse.ArgumentParser:
    """`--home` and `--config`, as a parent parser. A second-level command (`ingest docs`) takes
    them with `argparse.SUPPRESS` as default, so that its None does not overwrite what its group
    parsed before it (`foundry ingest --home H docs`)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--home",
        metavar="DIR",
        default=default,
        help="data folder (default $FOUNDRY_HOME, else the configuration's home, else ./.foundry)",
    )
    options.add_argument(
        "--config",
        metavar="FILE",
        default=default,
        help="foundry.toml to use (default $FOUNDRY_CONFIG, else ./foundry.toml, else the"
        " home's foundry.toml: --home, else $FOUNDRY_HOME, else ./.foundry; else the built-in"
        " defaults)",
    )
    return options


def build_parser() -> argparse.ArgumentParser:
    common = home_options()
    below_group = home_options(argparse.SUPPRESS)
    parser = argparse.ArgumentParser(
        prog="foundry", description="Verifiable RL tasksets from your documents."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", parents=[common], help="ingest PATHs, run every stage, export")
    for source in SOURCES:
        flags = [f"--{name}" for name in (source.name, *source.aliases)]
        run.add_argument(
            *flags,
            dest=source.name,
            action="append",
            default=[],
            metavar="ITEM",
            help=f"also ingest {source.items} (repeatable)",
        )
    bare = bare_source()
    run.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help=f"{bare.items}, as --{bare.name} (none given and an empty lake: the bundled"
        " samples of every source type)",
    )
    run.add_argument(
        "--out", metavar="DIR", help="export under this folder instead of $FOUNDRY_HOME/tasksets"
    )
    run.add_argument(
        "--band", nargs=2, metavar=("LO", "HI"), help="export only tasks with LO<=p<=HI"
    )
    run.add_argument(
        "--max-tokens", type=int, metavar="N", help="stop at this many live LLM tokens"
    )
    run.add_argument("--max-cost", type=float, metavar="USD", help="stop at this LLM cost")
    run.add_argument(
        "--publish-to",
        metavar="URL",
        help="publish the new version whole to an fsspec URL or folder (`hf://datasets/OWNER/"
        "NAME` for the Hub; default: [export] publish_to)",
    )
    run.add_argument(
        "--plan",
        action="store_true",
        help="estimate the run's calls, tokens and cost per stage with their range, and exit",
    )
    run.add_argument("--json", action="store_true", help="with --plan: machine-readable")
    run.add_argument(
        "--kind",
        action="append",
        metavar="KIND",
        help="make only this task kind, one a registered family makes (repeatable; default:"
        " every kind)",
    )
    run.add_argument(
        "--since",
        type=date.fromisoformat,
        metavar="DAY",
        help="only commits and traces from this day (YYYY-MM-DD, UTC)",
    )
    run.add_argument(
        "--until",
        type=date.fromisoformat,
        metavar="DAY",
        help="only commits and traces up to this day (YYYY-MM-DD, UTC)",
    )

    ingest = sub.add_parser("ingest", parents=[common], help="add sources to the lake")
    types = ingest.add_subparsers(dest="kind", required=True)
    for source in SOURCES:
        reader = types.add_parser(
            source.name, aliases=list(source.aliases), parents=[below_group], help=source.help
        )
        reader.add_argument("items", nargs="+", metavar="ITEM", help=source.items)
        for option, text in source.options.items():
            reader.add_argument(f"--{option}", help=text)
    for stage in command_stages():
        sub.add_parser(stage.name.replace("_", "-"), parents=[common], help=stage.help)
    calibrate = sub.add_parser(
        "calibrate", parents=[common], help="measure solver pass rates and bands"
    )
    calibrate.add_argument(
        "--solver",
        metavar="MODEL",
        help="re-calibrate every verified task against this model, kept beside the first",
    )
    calibrate.add_argument(
        "--solver-url", metavar="URL", help="its server (default: the configured solver's)"
    )

    export = sub.add_parser("export", parents=[common], help="write a taskset version")
    export.add_argument(
        "--out", metavar="DIR", help="export under this folder instead of $FOUNDRY_HOME/tasksets"
    )
    export.add_argument(
        "--band", nargs=2, metavar=("LO", "HI"), help="export only tasks with LO<=p<=HI"
    )
    export.add_argument(
        "--solver",
        metavar="MODEL",
        help="use this model's re-calibration (foundry calibrate --solver), exported as"
        " <name>-<model>",
    )
    export.add_argument(
        "--format",
        action="append",
        choices=[p.name for p in PROJECTIONS],
        dest="formats",
        help="also write this trainer projection (repeatable; default: [export] formats): "
        + ", ".join(f"{p.name} ({p.help})" for p in PROJECTIONS),
    )
    destination = export.add_mutually_exclusive_group()
    destination.add_argument(
        "--publish-to",
        metavar="URL",
        help="publish the version whole to an fsspec URL or folder (`hf://datasets/OWNER/NAME`"
        " for the Hub; default: [export] publish_to)",
    )
    destination.add_argument(
        "--push-to-hub",
        metavar="REPO",
        help="publish the version whole to this Hugging Face dataset repo (OWNER/NAME)",
    )

    train = sub.add_parser(
        "train", parents=[common], help="GRPO-train a policy on a taskset (TRL), its rewards"
    )
    train.add_argument(
        "--taskset", required=True, metavar="DIR", help="a taskset folder or one of its versions"
    )
    train.add_argument(
        "--model",
        default="embedded",
        metavar="MODEL",
        help="policy: embedded (SmolLM2-135M, the default), a folder or hub id",
    )
    train.add_argument(
        "--smoke", action="store_true", help="one CPU step, one task per environment: the wiring"
    )
    train.add_argument("--steps", type=int, metavar="N", help="training steps (default 200)")
    train.add_argument(
        "--learning-rate",
        type=float,
        metavar="LR",
        help="instead of the default (1e-6 on CPU and GPU)",
    )
    train.add_argument(
        "--completion-tokens",
        type=int,
        metavar="N",
        help="longest completion (default 512 on CPU, 256 on GPU; short answers train faster"
        " with less)",
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
    train.add_argument(
        "--out", metavar="DIR", help="output folder (default $FOUNDRY_HOME/train/NAME-VERSION)"
    )
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
    evaluate.add_argument(
        "taskset", metavar="TASKSET", help="a taskset folder or one of its versions"
    )
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
    loop.add_argument(
        "--rounds",
        type=int,
        default=2,
        metavar="N",
        help="rounds to have run, finished ones kept (default 2)",
    )
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
        "--name",
        default="loop",
        metavar="NAME",
        help="the loop's name: its taskset is <export name>-<name> (default loop)",
    )
    loop.add_argument(
        "--attempts", type=int, default=4, metavar="K", help="attempts per eval task (default 4)"
    )
    loop.add_argument("--steps", type=int, metavar="N", help="training steps per round")
    loop.add_argument(
        "--learning-rate", type=float, metavar="LR", help="the training's learning rate"
    )
    loop.add_argument(
        "--completion-tokens", type=int, metavar="N", help="the training's longest completion"
    )
    loop.add_argument("--json", action="store_true", help="machine-readable output")

    judges = sub.add_parser("judges", parents=[common], help="judge quality figures")
    judge_commands = judges.add_subparsers(dest="judges_command", required=True)
    report = judge_commands.add_parser(
        "report", parents=[below_group], help="agreement, kappa, errors, seed variance"
    )
    report.add_argument("--json", action="store_true", help="machine-readable output")
    variance = judge_commands.add_parser(
        "variance", parents=[below_group], help="re-ask open-book verdicts with other seeds"
    )
    variance.add_argument(
        "--tasks", type=int, default=20, metavar="N", help="how many judged tasks (default 20)"
    )
    variance.add_argument(
        "--seeds", type=int, default=2, metavar="S", help="other seeds per verdict (default 2)"
    )
    variance.add_argument(
        "--temperature",
        type=float,
        metavar="T",
        help="sample the judges at this temperature instead",
    )

    proxy = sub.add_parser(
        "proxy", parents=[common], help="record every call to an OpenAI-compatible server"
    )
    proxy.add_argument(
        "--upstream", required=True, metavar="URL", help="the server's base URL (…/v1)"
    )
    proxy.add_argument(
        "--port", type=int, default=8400, metavar="N", help="port to listen on (default 8400)"
    )
    proxy.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="HOST",
        help="address to listen on (default 127.0.0.1; beyond loopback only with an access key)",
    )
    proxy.add_argument(
        "--access-key",
        metavar="KEY",
        default=os.environ.get("FOUNDRY_PROXY_KEY"),
        help="the key clients must send as X-Proxy-Key (default $FOUNDRY_PROXY_KEY); needed"
        " when --host is not loopback",
    )
    proxy.add_argument(
        "--api-key",
        metavar="KEY",
        help="key for the upstream (else each client's own key is forwarded)",
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
        help="register the pipeline/nightly, adhoc/adhoc, train/train and loop/loop deployments"
        " with the Prefect server at $PREFECT_API_URL and run their flow runs until stopped",
    )
    serve.add_argument(
        "--wait",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long to wait for the server's health check to answer before giving up with"
        " exit status 2 (default 120)",
    )
    serve.add_argument(
        "--pool",
        metavar="NAME",
        help="register the deployments for this work pool and exit: its workers (`prefect"
        " worker start --pool NAME`, on any host with this checkout at the same path) run them;"
        " train/train goes to [serve] train_pool where set",
    )

    redteam = sub.add_parser(
        "redteam",
        parents=[common],
        help="attack the graders of the lake's verified tasks (code, answers, reports,"
        " tool calls): every attack must score 0 and be shown to have run (exit 1 otherwise)",
    )
    redteam.add_argument(
        "--every-task",
        action="store_true",
        help="every task (default: one per family, and per language for code tasks)",
    )
    redteam.add_argument("--quick", action="store_true", help="one attack of each class")
    redteam.add_argument(
        "--wall-s",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="each sandboxed run's time limit (default 30)",
    )

    stats = sub.add_parser("stats", parents=[common], help="the funnel with rejection reasons")
    stats.add_argument("--json", action="store_true", help="machine-readable output")

    curate = sub.add_parser(
        "curate",
        parents=[common],
        help="a local web page to accept, reject or edit tasks (decisions steer later runs)",
    )
    curate.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    curate.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any)")
    curate.add_argument(
        "--reviewer",
        help="the name decisions are recorded under (default $FOUNDRY_REVIEWER, else the user)",
    )

    diff = sub.add_parser(
        "diff",
        parents=[common],
        help="what changed between two taskset versions: tasks added, removed, changed, bands",
    )
    diff.add_argument(
        "versions",
        nargs="*",
        metavar="VERSION",
        help="two versions (v0001, docqa/v0001 or a folder); one: it against the latest;"
        " none: the latest against the one before",
    )
    diff.add_argument("--json", action="store_true", help="machine-readable, every task listed")

    page = sub.add_parser(
        "report",
        parents=[common],
        help="a static HTML page: funnel, difficulty, judge agreement, cost, sample tasks",
    )
    page.add_argument("--out", required=True, metavar="FILE", help="the HTML file to write")
    page.add_argument(
        "--taskset",
        metavar="DIR",
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
