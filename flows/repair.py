"""The repair loop's control: which way an out-of-band task moves along its generator's ladder.

A task the solver finds too easy moves to the next harder level, one it finds too hard to the
next easier one; the levels beyond are the fallbacks when a level cannot be made for this task.
Moves keep the direction of the first: a variant that overshoots (its parent was too easy, it is
too hard) has the band between two adjacent levels, and moving back would only undo the step.
An original task moves at most `max_steps` times (raise it and the next run moves it on).
"""

from __future__ import annotations

from dataclasses import dataclass

from data.lake import Direction, Lineage
from generators.knobs import Ladder, Level


@dataclass(frozen=True)
class Move:
    direction: Direction
    levels: list[Level]  # to try in order, nearest first


@dataclass(frozen=True)
class Stop:
    reason: str  # in_band, no_band, straddles_band, step_limit, no_harder_level, ...
    detail: str = ""  # step_limit: the max_steps it was reached under


def next_move(band: str, lineage: Lineage, ladder: Ladder, max_steps: int) -> Move | Stop:
    """Where a task measured in `band` goes next, given its lineage."""
    if band == "in_band":
        return Stop("in_band")
    if band not in ("too_easy", "too_hard"):
        return Stop("no_band", band)
    direction: Direction = "harder" if band == "too_easy" else "easier"
    repair = lineage.repair
    if repair is not None and repair.direction != direction:
        return Stop("straddles_band")
    if repair is not None and repair.step >= max_steps:
        return Stop("step_limit", str(max_steps))
    levels = ladder.beyond(str(lineage.knobs.get("level", ladder.base)), direction)
    if not levels:
        return Stop(f"no_{direction}_level")
    return Move(direction, levels)
