"""The review and repair stages: a calibrated task's rubric (answer and report tasks), its
reward hacks and their remedy (a new task with a tighter verifier), and an out-of-band task's
variant one difficulty level toward the band (a new task). Both derive tasks that the same run
verifies and calibrates again (`DERIVED`, `flows.stage_runs.run_stages`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from data.lake import (
    Attempt,
    Direction,
    Record,
    Task,
)
from data.llm import LLMClient
from families import family_of, reviewed_kinds
from families.base import Family
from families.stage import (
    EVALUATE,
    Outcome,
    StageContext,
    kind_in,
    kinds_in_scope,
    load_tasks,
    pending_items,
)
from flows.repair import Stop, next_move
from generators.checks import CheckFailure
from generators.knobs import Level
from judges.review import review

REMEDIED = "hackable_remedied"  # review reason: a tighter verifier made a new task
REPAIRED = "repaired"  # repair reason: a variant one difficulty level away made a new task
# revise reasons (`flows.revision`): a reviewer's edit written, a rejected task replaced
EDITED = "edited"
REPLACED = "replaced"
DERIVED = (f"rejected:{REMEDIED}", f"done:{REPAIRED}", f"done:{EDITED}", f"done:{REPLACED}")
REMEDY_ROUNDS = 2  # a remedied task can be remedied once more: the remedy ladder has two steps


def pending_review(ctx: StageContext) -> list[str]:
    """Calibrated tasks of the families that are reviewed (those with a hack audit)."""
    reviewed = [kind for kind in reviewed_kinds() if ctx.config.scope.makes(kind)]
    if not reviewed:
        return []
    return pending_items(
        ctx,
        "review",
        "SELECT item_id AS id FROM status s JOIN tasks t ON t.task_id = s.item_id"
        f" WHERE s.stage = 'calibrate' AND s.status = 'done' AND {kind_in(reviewed, 't.kind')}"
        " ORDER BY id",
    )


@dataclass(frozen=True)
class ToReview:
    """A calibrated task and its calibration attempts."""

    task: Task
    attempts: list[Attempt]


def load_tasks_with_attempts(ctx: StageContext, task_ids: list[str]) -> dict[str, ToReview]:
    tasks = load_tasks(ctx, task_ids)
    attempts: dict[str, list[Attempt]] = {}
    for attempt in ctx.lake.records("attempts", "list_contains(?, task_id)", [task_ids]):
        attempts.setdefault(attempt.task_id, []).append(attempt)
    return {task_id: ToReview(task, attempts.get(task_id, [])) for task_id, task in tasks.items()}


async def review_one(
    ctx: StageContext, task_id: str, loaded: ToReview, client: LLMClient
) -> Outcome:
    task = loaded.task
    solver = client.model("solver")  # attempts of re-calibrations and evaluations aside
    mine = [
        a
        for a in loaded.attempts
        if a.solver_model == solver and not (a.stage or "").startswith(EVALUATE)
    ]
    audit = family_of(task.kind).audit
    if audit is None:
        raise LookupError(f"{task.kind} tasks are not reviewed")
    result = await review(task, mine, client, audit)
    records: dict[str, list[Record]] = {
        "rubrics": list(result.rubric),
        "hack_verdicts": list(result.verdicts),
        "reviews": [result.review],
    }
    if result.remedied is not None:
        records["tasks"] = [result.remedied]
        detail = f"{result.review.remedy}: {result.remedied.task_id}"
        return Outcome(ctx.status("review", task_id, "rejected", REMEDIED, detail), records)
    reason = "hackable" if result.review.hackable else "reviewed"
    status = ctx.status("review", task_id, "done", reason, result.review.rubric_error)
    return Outcome(status, records)


def pending_repair(ctx: StageContext) -> list[str]:
    """Tasks out of the band whose review found the verifier sound where their family is
    reviewed (hackable ones would pass their verifier on to the variant) and which the repair
    loop has not settled; a task that stopped at the step limit is taken again once
    `repair.max_steps` is raised."""
    max_steps = ctx.config.repair.max_steps
    if max_steps == 0:
        return []
    rows = ctx.lake.rows(
        "SELECT c.item_id AS id FROM status c JOIN tasks t ON t.task_id = c.item_id"
        " LEFT JOIN status r ON r.item_id = c.item_id AND r.stage = 'review'"
        " AND r.status = 'done' AND r.reason = 'reviewed'"
        " LEFT JOIN status p ON p.item_id = c.item_id AND p.stage = 'repair'"
        " WHERE c.stage = 'calibrate' AND c.status = 'done' AND c.reason <> 'in_band'"
        f" AND (r.item_id IS NOT NULL OR NOT {kind_in(reviewed_kinds(), 't.kind')})"
        f" AND {kinds_in_scope(ctx, 't.kind')}"
        " AND (p.status IS NULL OR p.status = 'failed'"
        " OR (p.reason = 'step_limit' AND TRY_CAST(p.detail AS INTEGER) < ?))"
        " ORDER BY id",
        [max_steps],
    )
    return [row["id"] for row in rows]


def family_inputs(
    tasks: Mapping[str, Task],
    load: Callable[[Family[Any, Any], list[Task]], Mapping[str, object]],
) -> dict[str, object]:
    """What each task's family loads for it (`load`: one of the family's loaders), by task id:
    each family is asked once, for its own tasks of the batch, in the order they come. A task
    of a kind no family makes gets None (its hook's `family_of` fails for that item alone)."""
    theirs: dict[int, tuple[Family[Any, Any], list[Task]]] = {}
    loaded: dict[str, object] = {}
    for task_id, task in tasks.items():
        try:
            family = family_of(task.kind)
        except LookupError:
            loaded[task_id] = None
            continue
        theirs.setdefault(id(family), (family, []))[1].append(task)
    for family, own in theirs.values():
        loaded.update(load(family, own))
    return loaded


@dataclass(frozen=True)
class ToRepair:
    """An out-of-band task, the band it was measured in, and what its family's variants and
    siblings draw on (what its `load_for_variants` loaded)."""

    task: Task
    band: str
    material: object


def load_repair_material(
    ctx: StageContext, task_ids: list[str], measured_by: str = "calibrate"
) -> dict[str, ToRepair]:
    """Each task with its band (as the stage `measured_by` measured it) and what its variants
    draw on, as its family loads it (`Family.load_for_variants`); the stage reads nothing else
    (a task its family loaded nothing for is left out: `input_missing`)."""
    tasks = load_tasks(ctx, task_ids)
    bands = {
        r["item_id"]: r["reason"]
        for r in ctx.lake.rows(
            "SELECT item_id, reason FROM status WHERE stage = ? AND list_contains(?, item_id)",
            [measured_by, task_ids],
        )
    }
    material = family_inputs(tasks, lambda family, own: family.load_for_variants(ctx, own))
    return {
        task_id: ToRepair(task, bands.get(task_id, ""), material[task_id])
        for task_id, task in tasks.items()
        if task_id in material
    }


async def repair_one(
    ctx: StageContext, task_id: str, loaded: ToRepair, client: LLMClient
) -> Outcome:
    task, band, material = loaded.task, loaded.band, loaded.material
    family = family_of(task.kind)
    if family.ladder is None:
        return Outcome(ctx.status("repair", task_id, "done", "no_ladder", task.kind))
    move = next_move(band, task.lineage, family.ladder, ctx.config.repair.max_steps)
    if isinstance(move, Stop):
        return Outcome(ctx.status("repair", task_id, "done", move.reason, move.detail))
    failures: list[str] = []
    made = await first_variant(
        family, task, move.levels, move.direction, material, client, ctx, failures
    )
    if made is None:
        reason = f"no_{move.direction}_variant"
        return Outcome(ctx.status("repair", task_id, "done", reason, "; ".join(failures)))
    level, variant = made
    detail = "; ".join([*failures, f"{level}: {variant.task_id}"])
    status = ctx.status("repair", task_id, "done", REPAIRED, detail)
    return Outcome(status, {"tasks": [variant]})


async def first_variant(
    family: Family,
    task: Task,
    levels: Sequence[Level],
    direction: Direction,
    material: object,
    client: LLMClient,
    ctx: StageContext,
    failures: list[str],
) -> tuple[str, Task] | None:
    """The variant of `task` at the first of `levels` that can be made, with its level's name;
    why each level before it could not be made is appended to `failures`."""
    for level in levels:
        try:
            return level.name, await family.variant(task, level, direction, material, client, ctx)
        except CheckFailure as failure:
            failures.append(f"{level.name}: {failure.reason}")
    return None
