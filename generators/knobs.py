"""Difficulty knobs: a generator's variants of a task, declared as levels from easiest to hardest.

A level names one setting of the generator's knobs (hints, lexical overlap, hops, ...). The
repair loop moves an out-of-band task along its generator's ladder: one level harder when the
solver finds it too easy, one level easier when too hard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Direction = Literal["harder", "easier"]
KnobValue = int | str


@dataclass(frozen=True)
class Level:
    name: str
    knobs: dict[str, KnobValue]


@dataclass(frozen=True)
class Ladder:
    """Levels ordered from easiest to hardest; `base` is where a freshly generated task sits."""

    levels: tuple[Level, ...]
    base: str

    def __post_init__(self) -> None:
        names = [level.name for level in self.levels]
        if len(set(names)) != len(names) or self.base not in names:
            raise ValueError(f"ladder levels must be distinct and include {self.base!r}: {names}")

    def level(self, name: str) -> Level:
        return next(level for level in self.levels if level.name == name)

    def beyond(self, name: str, direction: Direction) -> list[Level]:
        """The levels past `name` in `direction`, nearest first."""
        index = [level.name for level in self.levels].index(name)
        if direction == "harder":
            return list(self.levels[index + 1 :])
        return list(reversed(self.levels[:index]))


def repair_step(
    knobs: dict[str, KnobValue], parent_id: str, level: Level, direction: Direction, base: str
) -> dict[str, KnobValue]:
    """The lineage knobs of a variant at `level` made from a task with `knobs` (the parent's
    own step-specific knobs already dropped): the level's knobs and where the repair loop went."""
    return {
        **knobs,
        **level.knobs,
        "level": level.name,
        "repair_of": parent_id,
        "repair_root": knobs.get("repair_root", parent_id),
        "repair_step": int(knobs.get("repair_step", 0)) + 1,
        "repair_path": f"{knobs.get('repair_path', knobs.get('level', base))}>{level.name}",
        "repair_direction": direction,
    }
