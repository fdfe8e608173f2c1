"""The outcome of scoring one attempt: a reward and why, or no verdict and why not."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass

from data.runtime.errors import NoVerdict


@dataclass(frozen=True)
class Score:
    reward: float
    why: str
    exact: bool = False  # the answer is the gold answer itself (after normalisation)


@dataclass(frozen=True)
class NoScore:
    """The grader could not judge the attempt: `NoVerdict`'s reason and detail."""

    reason: str
    detail: str


async def verdict(grading: Awaitable[Score]) -> Score | NoScore:
    """The score `grading` gives, or, where it raised `NoVerdict`, why there is none."""
    try:
        return await grading
    except NoVerdict as missing:
        return NoScore(missing.reason, missing.detail)
