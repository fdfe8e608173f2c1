"""One command table (`flows/commands.py`) makes the parser, the dispatch and the command list
of docs/cli.md: the list shown there is the table's, command for command and help line for help
line, and a command added to the table or to the page alone is reported. Every command the
parser takes is found in the table, each runs something and each group names where its
subcommand goes."""

from __future__ import annotations

import pytest

from flows import commands
from flows.commands import DOCS, DOCS_END, DOCS_START, Command, build_parser, command_of


def listed(text: str) -> list[str]:
    """The rows of the command list between the page's markers."""
    start, end = text.index(DOCS_START), text.index(DOCS_END)
    return [line for line in text[start:end].splitlines() if line.startswith("| `foundry")]


def list_problems(text: str) -> list[str]:
    """The rows the page's command list has and the table's has not, and the other way."""
    page, table = listed(text), listed(commands.docs_table())
    return [f"only on the page: {row}" for row in page if row not in table] + [
        f"only in the table: {row}" for row in table if row not in page
    ]


def test_the_docs_command_list_is_the_tables():
    text = DOCS.read_text(encoding="utf-8")
    assert list_problems(text) == [], "run `python -m flows.commands` to write the list anew"
    assert commands.docs_with_table(text) == text  # the same order too


def test_a_command_in_the_table_or_on_the_page_alone_is_reported(monkeypatch):
    text = DOCS.read_text(encoding="utf-8")
    table = commands.commands()
    extra = Command("frobnicate", "frob the lake", lambda args: 0)
    monkeypatch.setattr(commands, "commands", lambda: [*table, extra])
    assert list_problems(text) == ["only in the table: | `foundry frobnicate` | frob the lake |"]
    monkeypatch.setattr(commands, "commands", lambda: table[1:])
    assert list_problems(text) == [
        "only on the page: | `foundry run` | ingest PATHs, run every stage, export |"
    ]


def _leaves(table, words=()):
    for command in table:
        if command.subcommands:
            yield from _leaves(command.subcommands, (*words, command.name))
        else:
            yield (*words, command.name), command


def test_every_command_runs_something_and_every_group_says_where_its_choice_goes():
    table = commands.commands()
    names = [name for command in table for name in command.names]
    assert len(names) == len(set(names))
    for command in table:
        if command.subcommands:
            assert command.dest and command.run is None, command.name
    leaves = list(_leaves(table))
    assert all(callable(command.run) for _, command in leaves)
    assert all(command.plan is None or command.flow for _, command in leaves)


@pytest.mark.parametrize(
    "words", [words for words, _ in _leaves(commands.commands())], ids=" ".join
)
def test_the_parser_takes_each_command_and_the_dispatch_finds_it_in_the_table(words):
    required = {
        ("run",): [],
        ("train",): ["--taskset", "t"],
        ("evaluate",): ["t", "--policy", "p"],
        ("proxy",): ["--upstream", "http://x/v1"],
        ("report",): ["--out", "r.html"],
    }
    rest = required.get(words, ["item"] if words[0] == "ingest" else [])
    args = build_parser().parse_args([*words, *rest])
    found, listed_as = command_of(args), dict(_leaves(commands.commands()))[words]
    shown = ("name", "help", "flow", "calls_models", "takes_kinds")
    assert [getattr(found, f) for f in shown] == [getattr(listed_as, f) for f in shown]


def test_an_alias_finds_its_command():
    args = build_parser().parse_args(["ingest", "repo", "x.git"])
    assert args.kind == "repo" and command_of(args).name == "repos"
