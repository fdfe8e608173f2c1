"""What a verifier type is to the rest of the code: one record per type, in `REGISTERED`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from data.export import Packaged
from data.lake import Remedy, Task
from data.llm import LLMClient
from judges.score import Score

Grade = Callable[[Task, str, LLMClient], Awaitable[Score]]
# whether an attempt is the task's gold itself: genuine by construction, so never shown to the
# hack panel
IsGold = Callable[[Task, str], bool]
# the tighter verifier specs a hack remedy tries, in order, from the task's spec and the rubric
# items that close the hacks found (`judges.hacks`)
Tighten = Callable[[Any, list[str]], list[tuple[Remedy, Any]]]


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


def spaced(text: str) -> str:
    """`text` with every run of white space one space, trimmed."""
    return " ".join(text.split())


def with_rubric(spec: Any, closing: list[str]) -> list[str]:
    """`spec`'s rubric with the items that close the hacks found, each once, in order."""
    return list(dict.fromkeys([*spec.rubric, *closing]))


def same_reply(task: Task, attempt: str) -> bool:
    """Whether `attempt` is the task's reference reply, up to case and white space."""
    return spaced(attempt).casefold() == spaced(task.answer).casefold()


@dataclass(frozen=True)
class VerifierType:
    """A verifier type: its name (the spec's `type`), its spec class in
    `data/lake/records/specs.py`, and
    how an attempt is scored, rewarded, self-checked and, when hacked, tightened."""

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
    is_gold: IsGold = same_reply
    # None: no automatic remedy (a hacked task stays hackable)
    tighter: Tighten | None = None
    # how the exported verifiers package grades it (`data.export.verifiers_package`); None: its
    # tasks are left out of the package
    packaged: Packaged | None = None
    # the red team's attack classes its grade must refuse (`judges.redteam`): a judged type
    # at least prompt injection
    must_refuse: tuple[str, ...] = ()
