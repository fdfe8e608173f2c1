"""Each `foundry` command's arguments, one function a command, as the command table
(`flows/commands.py`) names them. `--home` and `--config`, which every command takes, are added
by the parser the table builds (`flows.cli_args.home_options`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from datetime import date

from data.export.projections import REGISTERED as PROJECTIONS
from sources import REGISTERED as SOURCES
from sources import bare as bare_source
from sources.base import Source


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """A command that takes only `--home` and `--config` (each stage's)."""


def source_arguments(source: Source) -> Callable[[argparse.ArgumentParser], None]:
    """`foundry ingest NAME`'s arguments: its items, and the source type's own options."""

    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("items", nargs="+", metavar="ITEM", help=source.items)
        for option, text in source.options.items():
            parser.add_argument(f"--{option}", help=text)

    return arguments


def run_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry run`'s arguments."""
    for source in SOURCES:
        flags = [f"--{name}" for name in (source.name, *source.aliases)]
        parser.add_argument(
            *flags,
            dest=source.name,
            action="append",
            default=[],
            metavar="ITEM",
            help=f"also ingest {source.items} (repeatable)",
        )
    bare = bare_source()
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help=f"{bare.items}, as --{bare.name} (none given and an empty lake: the bundled"
        " samples of every source type)",
    )
    parser.add_argument(
        "--out", metavar="DIR", help="export under this folder instead of $FOUNDRY_HOME/tasksets"
    )
    parser.add_argument(
        "--band", nargs=2, metavar=("LO", "HI"), help="export only tasks with LO<=p<=HI"
    )
    parser.add_argument(
        "--max-tokens", type=int, metavar="N", help="stop at this many live LLM tokens"
    )
    parser.add_argument("--max-cost", type=float, metavar="USD", help="stop at this LLM cost")
    parser.add_argument(
        "--publish-to",
        metavar="URL",
        help="publish the new version whole to an fsspec URL or folder (`hf://datasets/OWNER/"
        "NAME` for the Hub; default: [export] publish_to)",
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="estimate the run's calls, tokens and cost per stage with their range, and exit",
    )
    parser.add_argument("--json", action="store_true", help="with --plan: machine-readable")
    parser.add_argument(
        "--kind",
        action="append",
        metavar="KIND",
        help="make only this task kind, one a registered family makes (repeatable; default:"
        " every kind)",
    )
    parser.add_argument(
        "--since",
        type=date.fromisoformat,
        metavar="DAY",
        help="only commits and traces from this day (YYYY-MM-DD, UTC)",
    )
    parser.add_argument(
        "--until",
        type=date.fromisoformat,
        metavar="DAY",
        help="only commits and traces up to this day (YYYY-MM-DD, UTC)",
    )


def calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry calibrate`'s arguments."""
    parser.add_argument(
        "--solver",
        metavar="MODEL",
        help="re-calibrate every verified task against this model, kept beside the first",
    )
    parser.add_argument(
        "--solver-url", metavar="URL", help="its server (default: the configured solver's)"
    )


def export_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry export`'s arguments."""
    parser.add_argument(
        "--out", metavar="DIR", help="export under this folder instead of $FOUNDRY_HOME/tasksets"
    )
    parser.add_argument(
        "--band", nargs=2, metavar=("LO", "HI"), help="export only tasks with LO<=p<=HI"
    )
    parser.add_argument(
        "--solver",
        metavar="MODEL",
        help="use this model's re-calibration (foundry calibrate --solver), exported as"
        " <name>-<model>",
    )
    parser.add_argument(
        "--format",
        action="append",
        choices=[p.name for p in PROJECTIONS],
        dest="formats",
        help="also write this trainer projection (repeatable; default: [export] formats): "
        + ", ".join(f"{p.name} ({p.help})" for p in PROJECTIONS),
    )
    destination = parser.add_mutually_exclusive_group()
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


def train_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry train`'s arguments."""
    parser.add_argument(
        "--taskset", required=True, metavar="DIR", help="a taskset folder or one of its versions"
    )
    parser.add_argument(
        "--model",
        default="embedded",
        metavar="MODEL",
        help="policy: embedded (SmolLM2-135M, the default), a folder or hub id",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="one CPU step, one task per environment: the wiring"
    )
    parser.add_argument("--steps", type=int, metavar="N", help="training steps (default 200)")
    parser.add_argument(
        "--learning-rate",
        type=float,
        metavar="LR",
        help="instead of the default (1e-6 on CPU and GPU)",
    )
    parser.add_argument(
        "--completion-tokens",
        type=int,
        metavar="N",
        help="longest completion (default 512 on CPU, 256 on GPU; short answers train faster"
        " with less)",
    )
    parser.add_argument(
        "--shuffle-rewards",
        action="store_true",
        help="control run: each step's rewards permuted across its completions",
    )
    parser.add_argument(
        "--in-band-only",
        action="store_true",
        help="train only on the tasks calibration put in the band (the rest teach nothing)",
    )
    parser.add_argument(
        "--out", metavar="DIR", help="output folder (default $FOUNDRY_HOME/train/NAME-VERSION)"
    )
    parser.add_argument(
        "--judge", action="store_true", help="also reward judged verifiers with the judge panel"
    )
    parser.add_argument(
        "--audit",
        type=int,
        default=8,
        metavar="N",
        help="rewarded completions the judge panel audits for reward hacks (default 8; 0: none)",
    )


def evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry evaluate`'s arguments."""
    parser.add_argument(
        "taskset", metavar="TASKSET", help="a taskset folder or one of its versions"
    )
    parser.add_argument(
        "--policy",
        action="append",
        required=True,
        metavar="POLICY",
        help="embedded, a model folder (e.g. what foundry train saved), MODEL@URL, or a model"
        " on the solver's server; give two or more for a before/after table (the first is the"
        " baseline)",
    )
    parser.add_argument("--split", default="eval", help="train or eval (default eval)")
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="the split's first N tasks by id only (a quick look; compare like with like)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--attempts", type=int, default=4, metavar="K", help="attempts per task (default 4)"
    )


def loop_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry loop`'s arguments."""
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        metavar="N",
        help="rounds to have run, finished ones kept (default 2)",
    )
    parser.add_argument(
        "--policy",
        default="embedded",
        help="round 1's policy: embedded, a model folder, or with --trainer given MODEL@URL",
    )
    parser.add_argument(
        "--trainer",
        choices=("grpo", "deployment", "given"),
        default="grpo",
        help="grpo: train here (foundry train); deployment: the train deployment, on its own"
        " work pool; given: no training, each round's policy is the next --given",
    )
    parser.add_argument(
        "--given",
        action="append",
        default=[],
        metavar="POLICY",
        help="with --trainer given: the policy round N makes (repeat, one per round)",
    )
    parser.add_argument(
        "--name",
        default="loop",
        metavar="NAME",
        help="the loop's name: its taskset is <export name>-<name> (default loop)",
    )
    parser.add_argument(
        "--attempts", type=int, default=4, metavar="K", help="attempts per eval task (default 4)"
    )
    parser.add_argument("--steps", type=int, metavar="N", help="training steps per round")
    parser.add_argument(
        "--learning-rate", type=float, metavar="LR", help="the training's learning rate"
    )
    parser.add_argument(
        "--completion-tokens", type=int, metavar="N", help="the training's longest completion"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def judges_report_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry judges report`'s arguments."""
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def judges_variance_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry judges variance`'s arguments."""
    parser.add_argument(
        "--tasks", type=int, default=20, metavar="N", help="how many judged tasks (default 20)"
    )
    parser.add_argument(
        "--seeds", type=int, default=2, metavar="S", help="other seeds per verdict (default 2)"
    )
    parser.add_argument(
        "--temperature",
        type=float,
        metavar="T",
        help="sample the judges at this temperature instead",
    )


def proxy_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry proxy`'s arguments."""
    parser.add_argument(
        "--upstream", required=True, metavar="URL", help="the server's base URL (…/v1)"
    )
    parser.add_argument(
        "--port", type=int, default=8400, metavar="N", help="port to listen on (default 8400)"
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="HOST",
        help="address to listen on (default 127.0.0.1; beyond loopback only with an access key)",
    )
    parser.add_argument(
        "--access-key",
        metavar="KEY",
        default=os.environ.get("FOUNDRY_PROXY_KEY"),
        help="the key clients must send as X-Proxy-Key (default $FOUNDRY_PROXY_KEY); needed"
        " when --host is not loopback",
    )
    parser.add_argument(
        "--api-key",
        metavar="KEY",
        help="key for the upstream (else each client's own key is forwarded)",
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="record calls as they are (default: secrets and personal data scrubbed first,"
        " as [traces] configures)",
    )


def serve_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry serve`'s arguments."""
    parser.add_argument(
        "--wait",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long to wait for the server's health check to answer before giving up with"
        " exit status 2 (default 120)",
    )
    parser.add_argument(
        "--pool",
        metavar="NAME",
        help="register the deployments for this work pool and exit: its workers (`prefect"
        " worker start --pool NAME`, on any host with this checkout at the same path) run them;"
        " train/train goes to [serve] train_pool where set",
    )


def redteam_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry redteam`'s arguments."""
    parser.add_argument(
        "--every-task",
        action="store_true",
        help="every task (default: one per family, and per language for code tasks)",
    )
    parser.add_argument("--quick", action="store_true", help="one attack of each class")
    parser.add_argument(
        "--wall-s",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="each sandboxed run's time limit (default 30)",
    )


def stats_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry stats`'s arguments."""
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def curate_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry curate`'s arguments."""
    parser.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any)")
    parser.add_argument(
        "--reviewer",
        help="the name decisions are recorded under (default $FOUNDRY_REVIEWER, else the user)",
    )


def diff_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry diff`'s arguments."""
    parser.add_argument(
        "versions",
        nargs="*",
        metavar="VERSION",
        help="two versions (v0001, docqa/v0001 or a folder); one: it against the latest;"
        " none: the latest against the one before",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable, every task listed")


def report_arguments(parser: argparse.ArgumentParser) -> None:
    """`foundry report`'s arguments."""
    parser.add_argument("--out", required=True, metavar="FILE", help="the HTML file to write")
    parser.add_argument(
        "--taskset",
        metavar="DIR",
        help="a taskset folder or one of its versions (default: the configured taskset's latest)",
    )
    return parser
