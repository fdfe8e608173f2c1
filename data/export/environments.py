"""The environments an exported task is attempted in, as the export sees them: one record each,
in `REGISTERED`, found for a task row by `environment_of`, never by branching on a harness name.

An environment is a harness with its runtime: a world's tools on the rollout's own world
(`world`), the tools production offered answered with what production recorded (`replay`),
`search` and `read` over the version's corpus (`search`), or one reply with no tools (`none`).
Each says which rows are its own, how many model calls an attempt may make, the prompt the
package shows (the search instructions merged into a search task's system message, as the
doc-search harness merged its own), what a task lacks to be packaged in it, and which files of
the version its packaged tasks need. The verifiers package (`data/export/verifiers_package.py`) and
the prime-rl fragment read it here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data.export.splits import Row
from data.prompts import load_prompt
from data.runtime import corpus_index, replay_runtime

# what a solver with native `search` and `read` tools is told, before the task's system message
SEARCH_INSTRUCTION = load_prompt(corpus_index.__file__, "search_tools_instruction")


def setup_of(task: Row, column: str) -> dict[str, Any] | None:
    """A task's `world`, `environment` or `workspace` column, parsed: None where the task has
    none (an empty cell, or JSON null)."""
    return json.loads(task[column]) if task[column] else None


def has_corpus(version: Path) -> bool:
    """Whether the taskset version carries the corpus its search tasks search."""
    return (version / corpus_index.CORPUS_FILE).exists()


def _prompt_as_it_is(task: Row) -> list[dict[str, Any]]:
    return task["prompt"]


def lacks_nothing(task: Row, version: Path) -> str | None:
    """What a task that needs nothing more lacks: nothing."""
    return None


@dataclass(frozen=True)
class Environment:
    """One environment: `name` (what the package's tool server offers: `world`, `replay`,
    `search`, `none`), which task rows are its own (`claims`), an attempt's turn limit from the
    row and the doc-search harness's (`max_turns`), the package's prompt for a row, what a row
    lacks to be packaged (a reason, or None), the version's files its tasks need, and whether
    it offers tools at all."""

    name: str
    claims: Callable[[Row], bool]
    max_turns: Callable[[Row, int], int]
    prompt: Callable[[Row], list[dict[str, Any]]] = _prompt_as_it_is
    lacks: Callable[[Row, Path], str | None] = lacks_nothing
    shipped: tuple[str, ...] = ()
    with_tools: bool = True  # False: an attempt is the prompt and one reply


def _with_search_instruction(task: Row) -> list[dict[str, Any]]:
    """The prompt with the search instructions ahead of its system message."""
    prompt = [dict(m) for m in task["prompt"]]
    instructions = SEARCH_INSTRUCTION.template.strip()
    if prompt and prompt[0]["role"] == "system":
        prompt[0]["content"] = f"{instructions}\n\n{prompt[0]['content']}"
    else:
        prompt.insert(0, {"role": "system", "content": instructions})
    return prompt


WORLD = Environment(
    "world",
    claims=lambda task: bool(setup_of(task, "world")),
    max_turns=lambda task, searches: int(setup_of(task, "world")["max_turns"]),
)
REPLAY = Environment(
    "replay",
    claims=lambda task: bool(setup_of(task, "environment")),
    # one call per recorded call, and a few more for the answer
    max_turns=lambda task, searches: (
        len(setup_of(task, "environment")["recorded"]) + replay_runtime.EXTRA_TURNS
    ),
)
SEARCH = Environment(
    "search",
    claims=lambda task: task["harness"] == corpus_index.HARNESS,
    max_turns=lambda task, searches: searches,
    prompt=_with_search_instruction,
    lacks=lambda task, version: None if has_corpus(version) else "doc_search_without_corpus",
    shipped=(corpus_index.CORPUS_FILE,),
)
SINGLE_TURN = Environment(
    "none", claims=lambda task: True, max_turns=lambda task, searches: 1, with_tools=False
)

# in the order a row is offered to them: the first that claims it is its environment
REGISTERED: list[Environment] = [WORLD, REPLAY, SEARCH, SINGLE_TURN]


def environment_of(task: Row) -> Environment:
    """The environment of a taskset row."""
    return next(found for found in REGISTERED if found.claims(task))
