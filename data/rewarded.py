"""What the trainer hands the hack audit (`judges.train_audit`): a completion a reward function
paid in full, with its row's columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rewarded:
    """A completion a reward function rewarded fully (reward >= 1), with its row's columns."""

    reward_function: str
    prompt: Any
    completion: Any  # text, or a conversation (a list of messages)
    columns: dict[str, Any]
