"""Which of the red team's code attacks a code task faces: those written for the language of
the files its reference changes (Python's `code_attacks`, or Node's `node_attacks` for a
JavaScript or TypeScript tree), with the hidden tests' own values hard-coded last."""

from __future__ import annotations

from collections.abc import Iterable

from data.runtime.call_replay import Call
from data.runtime.languages import of_path
from judges.redteam.code_attacks import ATTACKS, CodeAttack, admission_attacks, hard_coded
from judges.redteam.node_attacks import NODE_ATTACKS, node_admission_attacks, node_hard_coded


def runs_on_node(paths: Iterable[str]) -> bool:
    """Whether a task whose reference changes the files at `paths` is a Node tree's."""
    return any(of_path(path).runner == "node" for path in paths)


def code_attacks(files: dict[str, str], shown: list[Call]) -> list[CodeAttack]:
    """The whole red team against a task whose reference changes `files`; `shown`: the calls
    its hidden tests make into its targets, as recorded."""
    if runs_on_node(files):
        return [*NODE_ATTACKS, node_hard_coded(shown)]
    return [*ATTACKS, hard_coded(shown)]


def admission_attacks_for(files: dict[str, str], shown: list[Call]) -> list[CodeAttack]:
    """The attacks a task must hold against before it is admitted (`UnitTests.admit`)."""
    return node_admission_attacks(shown) if runs_on_node(files) else admission_attacks(shown)
