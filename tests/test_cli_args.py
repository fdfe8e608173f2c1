"""Every `foundry` command takes `--home` and `--config`; a command with a second level
(`ingest docs`, `judges report`) takes them before that level or after it, with the same
result."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from flows.commands import build_parser

SECOND_LEVEL = [
    ("ingest", "docs", ["notes.md"]),
    ("ingest", "repo", ["--rev", "v1.0..main", "repo.git"]),
    ("judges", "report", ["--json"]),
    ("judges", "variance", ["--tasks", "3"]),
]
NAMES = [f"{group} {command}" for group, command, _ in SECOND_LEVEL]


def _commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    """(words, parser) of every command that runs something, however deep."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        yield words, parser
    for group in groups:
        for name, command in group.choices.items():
            yield from _commands(command, (*words, name))


def test_every_command_takes_home_and_config():
    missing = [
        " ".join(words)
        for words, command in _commands(build_parser())
        if not {"--home", "--config"} <= {o for a in command._actions for o in a.option_strings}
    ]
    assert missing == []


@pytest.mark.parametrize("group, command, rest", SECOND_LEVEL, ids=NAMES)
def test_home_and_config_before_or_after_the_second_level_are_the_same(group, command, rest):
    given = ["--home", "h", "--config", "c.toml"]
    before = build_parser().parse_args([group, *given, command, *rest])
    after = build_parser().parse_args([group, command, *given, *rest])
    assert (before.home, before.config) == (after.home, after.config) == ("h", "c.toml")
    assert vars(before) == vars(after)


@pytest.mark.parametrize("group, command, rest", SECOND_LEVEL, ids=NAMES)
def test_home_and_config_default_to_none_at_either_level(group, command, rest):
    args = build_parser().parse_args([group, command, *rest])
    assert (args.home, args.config) == (None, None)


def test_one_level_can_give_home_and_the_other_config():
    args = build_parser().parse_args(["ingest", "--home", "h", "docs", "--config", "c", "p"])
    assert (args.home, args.config, args.items) == ("h", "c", ["p"])


def test_a_reader_that_goes_away_ends_the_command_quietly_with_141(tmp_path):
    foundry = Path(sys.executable).parent / "foundry"
    piped = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"'{foundry}' stats --home '{tmp_path}' | true"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 141, piped.stderr[-2000:]
    assert "Traceback" not in piped.stderr and "BrokenPipeError" not in piped.stderr
