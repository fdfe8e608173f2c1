"""The outcome of scoring one attempt: a reward and why."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Score:
    reward: float
    why: str
    exact: bool = False  # the answer is the gold answer itself (after normalisation)
