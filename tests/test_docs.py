"""The docs say what the code does: every `foundry …` command shown in the README and `docs/`
names a real subcommand and only flags it has, every `make …` target exists, every TOML block
loads as a configuration (each key commented out in it too), and every relative link resolves,
to a heading where it names one.
The checker is tried on a page with a removed flag, an unknown target, a bad key and a dead
link: each is reported."""

from __future__ import annotations

import argparse
import re
import shlex
import tempfile
from pathlib import Path

import pytest

from data.config import ConfigError, load_config
from flows.commands import build_parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
COMMAND = re.compile(r"(?:^|[\s;&|(])(?:\.venv/bin/)?foundry((?:\s+[^\s#`;&]+)*)")
MAKE = re.compile(r"(?:^|[\s;&(])make\s+([a-z][\w-]*)")
FLAG = re.compile(r"^\[?(--[a-z][a-z0-9-]*)")
COMMENTED_KEY = re.compile(r"^#\s?([a-z_]+\s*=.*)$", re.M)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def command_problems(words: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """What is wrong with `foundry <words>` against `parser`: an unknown subcommand or flag.
    A word with `|` offers alternatives (`generate | verify`); placeholders are skipped."""
    problems: list[str] = []
    current, known = parser, _subparsers(parser)
    alternatives: list[str] = []
    for index, word in enumerate(words):
        if word == "|" and alternatives:
            continue
        flag = FLAG.match(word)
        if flag:
            if flag.group(1) not in _flags(current):
                problems.append(f"{' '.join(['foundry', *words[:index]])}: no flag {flag.group(1)}")
            continue
        name = word.strip("[]…,.")
        if known and (name in known or (index and words[index - 1] == "|")):
            if name not in known:
                problems.append(f"foundry {' '.join(words)}: no subcommand {name!r}")
                continue
            alternatives.append(name)
            if index + 1 < len(words) and words[index + 1] == "|":
                continue
            current = known[name]
            known = _subparsers(current)
        elif known and re.fullmatch(r"[a-z][a-z-]*", name) and current is parser:
            problems.append(f"foundry {' '.join(words)}: no subcommand {name!r}")
            break
    return problems


def _joined(snippet: str) -> list[str]:
    """The snippet's lines without their comments, a synopsis's indented continuation lines
    (`    [--flag X]…`) joined to the command they continue."""
    lines: list[str] = []
    for raw in snippet.splitlines():
        line = raw.split(" # ")[0].split("  #")[0].rstrip()
        if lines and re.match(r"\s+[\[-]", line):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def page_problems(page: Path, text: str, makefile: str) -> list[str]:
    """Every problem of one page: commands, make targets, TOML blocks, relative links."""
    parser = build_parser()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    problems: list[str] = []
    snippets = [body for _, body in FENCE.findall(text)] + SPAN.findall(FENCE.sub("", text))
    for snippet in snippets:
        for line in _joined(snippet):
            for match in COMMAND.finditer(line):
                try:
                    words = shlex.split(match.group(1).replace("…", ""), posix=True)
                except ValueError:
                    words = match.group(1).split()
                problems += [f"{page.name}: {p}" for p in command_problems(words, parser)]
            for target in MAKE.findall(line):
                if target not in targets:
                    problems.append(f"{page.name}: no make target {target!r}")
    for language, body in FENCE.findall(text):
        if language == "toml":
            problems += [f"{page.name}: {p}" for p in toml_problems(body)]
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = page.parent / path if path else page
        if not linked.exists():
            problems.append(f"{page.name}: dead link {target}")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            problems.append(f"{page.name}: no heading for #{anchor} in {linked.name}")
    return problems


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped but for
    hyphens, spaces as hyphens."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    headings = re.findall(r"^#+\s+(.+?)\s*$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def toml_problems(body: str) -> list[str]:
    """Why a TOML block would not load as a configuration: as shown, and with each commented
    `key = value` line of it switched on by itself."""
    variants = [body] + [
        body.replace(match.group(0), match.group(1), 1) for match in COMMENTED_KEY.finditer(body)
    ]
    problems = []
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "foundry.toml"
        for variant in variants:
            path.write_text(variant)
            try:
                load_config(path, Path(scratch) / "home")
            except ConfigError as error:
                problems.append(str(error).replace(str(path), "block"))
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_target_setting_and_link_a_page_shows_is_real(page):
    makefile = (ROOT / "Makefile").read_text()
    assert page_problems(page, page.read_text(encoding="utf-8"), makefile) == []


def test_the_check_reports_a_removed_flag_a_missing_target_a_bad_key_and_a_dead_link(tmp_path):
    page = tmp_path / "page.md"
    text = (
        "Run `foundry export --format trl --zip` then `make shipit`.\n\n"
        "```bash\nfoundry ingest docs PATH… --rev HEAD\nfoundry frobnicate\n```\n\n"
        '```toml\n[export]\nformats = ["trl"]\n# colour = "blue"\n```\n\n'
        "See [the page](missing.md) and [its part](#nowhere).\n"
    )
    page.write_text(text)
    problems = page_problems(page, text, "run:\n\ttrue\n")
    assert any("no flag --zip" in p for p in problems)
    assert any("no flag --rev" in p for p in problems)  # a repository's flag, not a document's
    assert any("no subcommand 'frobnicate'" in p for p in problems)
    assert any("no make target 'shipit'" in p for p in problems)
    assert any("colour" in p for p in problems)
    assert any("dead link missing.md" in p for p in problems)
    assert any("no heading for #nowhere" in p for p in problems)
    assert len(problems) == 7
