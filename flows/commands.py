"""The `foundry` command table: every command once, with its name, one-line help, arguments,
handler, whether it calls models and the Prefect flow it runs. The parser (`build_parser`), the
dispatch (`flows/cli.py`) and the command list of docs/cli.md (`docs_table`; `python -m
flows.commands` rewrites it, tests/test_commands.py checks it) all come from it.

A command with `subcommands` is a group (`ingest docs`, `judges report`): its parser takes the
subcommand's name into `dest`, and the subcommand is what runs. The stage commands come from the
stage registry (`flows.stages.command_stages`) and `ingest`'s from the source registry, so the
table is built when asked for (`commands()`), from the registries as they are then."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from flows import cli_flows, cli_tools
from flows import commands_args as arguments
from flows.cli_args import home_options
from flows.stages import command_stages, llm_stages
from sources import REGISTERED as SOURCES

Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    """One `foundry` command.

    `run` runs it and gives the exit status; `flow`, the Prefect flow it runs, says that it
    runs under a Prefect API (`flows.prefect_server.prefect_api`) after the configuration is
    checked, and None that it starts no flow and never imports Prefect. `calls_models`: a cost
    limit needs a price for every configured model before it starts, and a run whose every LLM
    call failed exits 4. `plan`, when given, runs instead of the flow for `--plan` (no model is
    called). `takes_kinds`: its `--kind` is checked, instead of the configured `[scope]`'s."""

    name: str
    help: str
    run: Handler | None = None
    arguments: Callable[[argparse.ArgumentParser], None] = arguments.no_arguments
    aliases: tuple[str, ...] = ()
    calls_models: bool = False
    flow: str | None = None
    plan: Handler | None = None
    takes_kinds: bool = False
    subcommands: tuple[Command, ...] = ()
    dest: str | None = None  # a group's: where its parser puts the subcommand's name

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


def _stage_commands() -> list[Command]:
    """`foundry <stage>` for each stage with a command of its own, `_` as `-`."""
    calling_models = {stage.name for stage in llm_stages()}
    return [
        Command(
            stage.name.replace("_", "-"),
            stage.help,
            functools.partial(cli_flows.stage, stage.name),
            calls_models=stage.name in calling_models,
            flow=stage.name,
        )
        for stage in command_stages()
    ]


def _ingest() -> Command:
    readers = tuple(
        Command(
            source.name,
            source.help,
            cli_flows.ingest,
            arguments.source_arguments(source),
            aliases=tuple(source.aliases),
            flow="ingest",
        )
        for source in SOURCES
    )
    return Command("ingest", "add sources to the lake", subcommands=readers, dest="kind")


def _judges() -> Command:
    report = Command(
        "report",
        "agreement, kappa, errors, seed variance",
        cli_tools.judges_report,
        arguments.judges_report_arguments,
    )
    variance = Command(
        "variance",
        "re-ask open-book verdicts with other seeds",
        cli_flows.judge_variance,
        arguments.judges_variance_arguments,
        calls_models=True,
        flow="judge-variance",
    )
    return Command(
        "judges", "judge quality figures", subcommands=(report, variance), dest="judges_command"
    )


def commands() -> list[Command]:
    """Every `foundry` command, in the order `foundry --help` lists them."""
    run = Command(
        "run",
        "ingest PATHs, run every stage, export",
        cli_flows.run,
        arguments.run_arguments,
        calls_models=True,
        flow="pipeline",
        plan=cli_tools.plan,
        takes_kinds=True,
    )
    return [
        run,
        _ingest(),
        *_stage_commands(),
        Command(
            "calibrate",
            "measure solver pass rates and bands",
            cli_flows.calibrate,
            arguments.calibrate_arguments,
            calls_models=True,
            flow="calibrate",
        ),
        Command(
            "export",
            "write a taskset version",
            cli_flows.export,
            arguments.export_arguments,
            flow="export",
        ),
        Command(
            "train",
            "GRPO-train a policy on a taskset (TRL), its rewards",
            cli_flows.train,
            arguments.train_arguments,
            flow="train",
        ),
        Command(
            "evaluate",
            "policies' pass rates on a taskset's held-out split, each task in its environment",
            cli_flows.evaluate,
            arguments.evaluate_arguments,
            calls_models=True,
            flow="evaluate",
        ),
        Command(
            "loop",
            "rounds of export, train, held-out evaluation, re-measure and steering by the"
            " new policy's failures",
            cli_flows.loop,
            arguments.loop_arguments,
            calls_models=True,
            flow="loop",
        ),
        _judges(),
        Command(
            "proxy",
            "record every call to an OpenAI-compatible server",
            cli_tools.proxy,
            arguments.proxy_arguments,
        ),
        Command(
            "serve",
            "register the pipeline/nightly, adhoc/adhoc, train/train and loop/loop deployments"
            " with the Prefect server at $PREFECT_API_URL and run their flow runs until stopped",
            cli_tools.serve,
            arguments.serve_arguments,
        ),
        Command(
            "redteam",
            "attack the graders of the lake's verified tasks (code, answers, reports,"
            " tool calls): every attack must score 0 and be shown to have run (exit 1 otherwise)",
            cli_tools.redteam,
            arguments.redteam_arguments,
        ),
        Command(
            "stats",
            "the funnel with rejection reasons",
            cli_tools.stats,
            arguments.stats_arguments,
        ),
        Command(
            "curate",
            "a local web page to accept, reject or edit tasks (decisions steer later runs)",
            cli_tools.curate,
            arguments.curate_arguments,
        ),
        Command(
            "diff",
            "what changed between two taskset versions: tasks added, removed, changed, bands",
            cli_tools.diff,
            arguments.diff_arguments,
        ),
        Command(
            "report",
            "a static HTML page: funnel, difficulty, judge agreement, cost, sample tasks",
            cli_tools.report,
            arguments.report_arguments,
        ),
    ]


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command in the table. Every command takes `--home` and `--config`;
    a subcommand takes them too, with `argparse.SUPPRESS` as default, so that what its group
    parsed before it is kept (`foundry ingest --home H docs`)."""
    parser = argparse.ArgumentParser(
        prog="foundry", description="Verifiable RL tasksets from your documents."
    )
    _add_commands(parser, commands(), "command", home_options())
    return parser


def _add_commands(
    parser: argparse.ArgumentParser,
    table: list[Command] | tuple[Command, ...],
    dest: str,
    parent: argparse.ArgumentParser,
) -> None:
    chooser = parser.add_subparsers(dest=dest, required=True)
    for command in table:
        below = chooser.add_parser(
            command.name, aliases=list(command.aliases), parents=[parent], help=command.help
        )
        command.arguments(below)
        if command.subcommands:
            _add_commands(below, command.subcommands, command.dest, home_options(argparse.SUPPRESS))


def command_of(args: argparse.Namespace) -> Command:
    """The command `args` (parsed by `build_parser`) names: a group's chosen subcommand."""
    chosen, table, dest = None, commands(), "command"
    while table:
        chosen = next(command for command in table if getattr(args, dest) in command.names)
        table, dest = chosen.subcommands, chosen.dest
    return chosen


def command_lines() -> Iterator[tuple[str, str]]:
    """(`foundry WORDS`, help) of every command and subcommand, in the table's order; an
    alias in parentheses."""

    def lines(table, words: tuple[str, ...]) -> Iterator[tuple[str, str]]:
        for command in table:
            named = " ".join(("foundry", *words, command.name))
            also = "".join(f" (`{alias}`)" for alias in command.aliases)
            yield f"`{named}`{also}", command.help
            yield from lines(command.subcommands, (*words, command.name))

    return lines(commands(), ())


DOCS = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
DOCS_START = "<!-- the command table (flows/commands.py): `python -m flows.commands` writes it -->"
DOCS_END = "<!-- end of the command table -->"
PIPE = "\\|"  # a `|` in a help text, in a Markdown table


def docs_table() -> str:
    """The command list of docs/cli.md, between its two markers: a Markdown table of
    `command_lines()`."""
    rows = [f"| {named} | {text.replace('|', PIPE)} |" for named, text in command_lines()]
    return "\n".join(
        [DOCS_START, "", "| command | what it does |", "|---|---|", *rows, "", DOCS_END]
    )


def docs_with_table(text: str) -> str:
    """`text` (docs/cli.md) with the command list between its markers written anew."""
    before, found, rest = text.partition(DOCS_START)
    _, ended, after = rest.partition(DOCS_END)
    if not (found and ended):
        raise ValueError(f"{DOCS.name} has no command list between {DOCS_START} and {DOCS_END}")
    return before + docs_table() + after


if __name__ == "__main__":
    DOCS.write_text(docs_with_table(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the command list of {DOCS}", file=sys.stderr)
