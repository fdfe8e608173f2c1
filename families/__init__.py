"""The task families, one module each; a new family is a module and a line in `REGISTERED`.

`family_of(kind)` is how the stages, calibration, repair, review and export learn what a task
of that kind needs, instead of branching on its kind; `generation_stages()` is what the
pipeline runs to make the candidates, before it verifies and calibrates them, after the
sandbox stages (`sandbox_stages()`) that make the items some of them start from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from data.export import ExportKinds, FamilyCard
from data.registry import registered_for_now
from families import (
    bug_injection,
    commit_replay,
    commit_sequence,
    doc_qa,
    doc_report,
    function_rebuild,
    tool_replay,
    trace_answer,
    world_tool_use,
)
from families.base import Family
from families.stage import LLMStage, SandboxStage

REGISTERED: list[Family] = [
    doc_qa.FAMILY,
    commit_replay.FAMILY,
    function_rebuild.FAMILY,
    bug_injection.FAMILY,
    commit_sequence.FAMILY,
    trace_answer.FAMILY,
    tool_replay.FAMILY,
    world_tool_use.FAMILY,
    doc_report.FAMILY,
]


def family_of(kind: str) -> Family:
    """The family that makes tasks of `kind`."""
    for family in REGISTERED:
        if kind in family.kinds:
            return family
    raise LookupError(f"no task family makes {kind!r} tasks")


def kinds() -> list[str]:
    """Every registered family's task kinds."""
    return [kind for family in REGISTERED for kind in family.kinds]


def kinds_where(holds: Callable[[Family], bool]) -> tuple[str, ...]:
    """The kinds of the registered families `holds` is true of, in registry order: what code
    outside a family asks instead of keeping a list of kinds."""
    return tuple(kind for family in REGISTERED if holds(family) for kind in family.kinds)


def kinds_running(stage: LLMStage | SandboxStage) -> tuple[str, ...]:
    """The kinds of the registered families that run `stage` (an LLM or a sandbox stage): it
    has work while one of them is in scope."""
    return kinds_where(lambda family: stage in (*family.stages, *family.sandbox_stages))


def generation_stages() -> list[LLMStage]:
    """The registered families' generation stages in registry order, each once: a stage that
    feeds several families (`intents` for the trace families, `describe` for commit replay and
    commit sequence) runs once, where its first family puts it."""
    stages: dict[str, LLMStage] = {}
    for family in REGISTERED:
        for stage in family.stages:
            if stages.setdefault(stage.name, stage) is not stage:
                raise ValueError(f"two different stages are named {stage.name!r}")
    return list(stages.values())


def sandbox_stages() -> list[SandboxStage]:
    """The registered families' sandbox stages in registry order, each once (`replay` feeds
    both commit replay and commit sequence)."""
    stages: dict[str, SandboxStage] = {}
    for family in REGISTERED:
        for stage in family.sandbox_stages:
            if stages.setdefault(stage.name, stage) is not stage:
                raise ValueError(f"two different stages are named {stage.name!r}")
    return list(stages.values())


def reviewed_kinds() -> list[str]:
    """The kinds whose calibrated attempts are reviewed for rubrics and reward hacks."""
    return [kind for family in REGISTERED if family.reviewed for kind in family.kinds]


def export_kinds() -> ExportKinds:
    """What an export needs to know of the registered families' kinds."""
    return ExportKinds(
        reviewed=tuple(reviewed_kinds()),
        from_traces=tuple(k for family in REGISTERED if family.from_traces for k in family.kinds),
        made_by=stage_kinds(),
        cards={
            kind: FamilyCard(family.card_text(), family.task_category)
            for family in REGISTERED
            for kind in family.kinds
        },
    )


def stage_kinds() -> dict[str, tuple[str, ...]]:
    """Each generation stage and the kinds the families that run it make."""
    made: dict[str, list[str]] = {}
    for family in REGISTERED:
        for stage in family.stages:
            made.setdefault(stage.name, []).extend(family.kinds)
    return {name: tuple(kinds) for name, kinds in made.items()}


@contextmanager
def registered(family: Family) -> Iterator[Family]:
    """`family` registered for the duration (a family that lives outside this package, e.g. in
    a test module)."""
    taken = set(kinds()) & set(family.kinds)
    if taken:
        raise ValueError(f"kinds already registered: {sorted(taken)}")
    with registered_for_now(REGISTERED, family):
        yield family
