"""Consensus of a judge panel: majority, unanimity or a k-of-n quorum, robust to judge errors.

A judge that errored (after the client's retries) is neither a pass nor a fail. The panel's
decision stands only if it would be the same whichever way the errored judges had voted;
otherwise it is `undecided`, and the task is retried by a later run instead of being scored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from data.config import VerifyConfig

Outcome = Literal["pass", "fail", "undecided"]
Predicate = Callable[[int, int], bool]  # (votes for, panel size) -> does the claim hold?


def majority(votes: int, panel: int) -> bool:
    return votes * 2 > panel


def unanimous(votes: int, panel: int) -> bool:
    return panel > 0 and votes == panel


def quorum(k: int) -> Predicate:
    def holds(votes: int, panel: int) -> bool:
        return votes >= min(k, panel) and panel > 0

    return holds


def rule_from(config: VerifyConfig) -> tuple[str, Predicate]:
    """The configured consensus rule and its name as stored with each decision."""
    if config.consensus == "unanimous":
        return "unanimous", unanimous
    if config.consensus == "quorum":
        return f"quorum:{config.quorum}", quorum(config.quorum)
    return "majority", majority


@dataclass(frozen=True)
class Tally:
    outcome: Outcome
    passes: int
    fails: int
    errors: int
    agreement: float  # share of the judges that voted and agree with the outcome


def decide(decisions: list[str], holds: Predicate) -> Tally:
    """Apply `holds` to the pass votes of `decisions` (each "pass", "fail" or "error")."""
    passes, fails = decisions.count("pass"), decisions.count("fail")
    errors = len(decisions) - passes - fails
    panel = len(decisions)
    pessimistic, optimistic = holds(passes, panel), holds(passes + errors, panel)
    if pessimistic != optimistic:
        return Tally("undecided", passes, fails, errors, 0.0)
    outcome: Outcome = "pass" if pessimistic else "fail"
    voted = passes + fails
    agreeing = passes if outcome == "pass" else fails
    return Tally(outcome, passes, fails, errors, agreeing / voted if voted else 0.0)
