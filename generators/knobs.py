"""Difficulty knobs: a generator's variants of a task, declared as levels from easiest to hardest.

A level names one setting of the generator's knobs (hints, lexical overlap, hops, ...). The
repair loop moves an out-of-band task along its generator's ladder: one level harder when the
solver finds it too easy, one level easier when too hard.
"""

from __future__ import annotations

from dataclasses import dataclass

from data.lake import Direction, Lineage, RepairStep, Task

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


def repaired(
    lineage: Lineage,
    knobs: dict[str, KnobValue],
    parent: Task,
    level: Level,
    direction: Direction,
    base: str,
) -> Lineage:
    """`lineage` (the variant's, as its generator made it) for a variant of `parent` at
    `level`: `knobs` (what it carries over from the parent and its own) with the level's, and
    the repair step that made it. A variant is not remedied, whatever its parent was."""
    before = parent.lineage.repair
    step = RepairStep(
        parent=parent.task_id,
        root=before.root if before else parent.task_id,
        step=(before.step if before else 0) + 1,
        path=[
            *(before.path if before else [str(parent.lineage.knobs.get("level", base))]),
            level.name,
        ],
        direction=direction,
    )
    knobs = {**knobs, **level.knobs, "level": level.name}
    return lineage.model_copy(update={"knobs": knobs, "repair": step, "remedied": None})
