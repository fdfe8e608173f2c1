"""What a verifier type is to the rest of the code: one record per type, in `REGISTERED`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from data.llm import LLMClient
from data.records import Task
from judges.score import Score

Grade = Callable[[Task, str, LLMClient], Awaitable[Score]]


@dataclass(frozen=True)
class RewardRow:
    """One completion a trainer's reward function scores, with its row of the taskset."""

    prompt: Any  # text, or chat messages
    completion: Any  # text, or a conversation (a multi-turn episode)
    spec: Any  # the row's verifier spec
    gold: str
    columns: dict[str, Any]  # the row's other columns (`world`, `workspace`, ...)


Reward = Callable[[RewardRow], float | None]
# what a verifier must reject, from the task and the passage its answer is in (answer tasks):
# (the failure's words should it be accepted, the attempt's text)
Negatives = Callable[[Task, str], list[tuple[str, str]]]


@dataclass(frozen=True)
class VerifierType:
    """A verifier type: its name (the spec's `type`), its spec class in `data/records.py`, and
    how an attempt is scored."""

    name: str
    spec: type
    # scores an attempt's text; None: the task's family scores it, with what the type needs
    # (the sandbox for unit tests, the task's world for its final state)
    grade: Grade | None
    judged: bool = False  # its grade asks the judge panel (so a reward needs a judge model)
    sandboxed: bool = False  # its grade runs the attempt in the sandbox (`unit_test_reward`)
    # the trainer's reward with no model and no sandbox (`verifier_reward`); None: a judged
    # type's is `judge_reward`, unit tests' `unit_test_reward`
    reward: Reward | None = None
    # the self-check (`judges.selfcheck`): the task's gold must score 1 (else `gold_rejected`)
    # and each negative below 1; None: the family checks it (mutants of the reference's change,
    # a world's wrong variants)
    negatives: Negatives | None = None
    gold_rejected: str = "gold answer rejected"
