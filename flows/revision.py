"""The `revise` stage: each task a reviewer rejected (`foundry curate`) is replaced by a new
task from the same source at the same level, as `foundry loop` replaces what a policy failed:
its lineage names the rejection (`review`: the task, the reason, the reviewer's note) the way
a steered task names the failure it targets, and the rejection is a rubric item of the
rejected task (`data.curation.rejection_rubric`). The new task is verified, calibrated and
reviewed like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

from data.curation import LATEST_SQL
from data.llm import LLMClient
from data.records import Decision, ReviewRef
from families import family_of
from families.stage import LLMStage, Outcome, StageContext, pending_items
from flows.review_stages import ToRepair, load_repair_material
from generators.checks import CheckFailure

STAGE = "revise"


def pending_revisions(ctx: StageContext) -> list[str]:
    """The rejections (decision ids) whose task has no replacement yet, where the rejection
    is still the task's latest decision."""
    sql = f"SELECT decision_id AS id FROM ({LATEST_SQL}) WHERE decision = 'reject' ORDER BY id"
    return pending_items(ctx, STAGE, sql)


@dataclass(frozen=True)
class ToRevise:
    decision: Decision
    repair: ToRepair  # the rejected task with what a new task from its source draws on


def load_revisions(ctx: StageContext, decision_ids: list[str]) -> dict[str, ToRevise]:
    decisions = {
        d.decision_id: d
        for d in ctx.lake.records("decisions", "list_contains(?, decision_id)", [decision_ids])
    }
    material = load_repair_material(ctx, sorted({d.task_id for d in decisions.values()}))
    return {
        i: ToRevise(d, material[d.task_id]) for i, d in decisions.items() if d.task_id in material
    }


async def revise_one(
    ctx: StageContext, decision_id: str, loaded: ToRevise, client: LLMClient
) -> Outcome:
    """A new task from the rejected task's source, its lineage naming the rejection."""
    decision, task = loaded.decision, loaded.repair.task
    try:
        made = await family_of(task.kind).sibling(task, loaded.repair.material, client, ctx)
    except CheckFailure as failure:
        return Outcome(ctx.status(STAGE, decision_id, "done", "no_replacement", failure.reason))
    review = ReviewRef(
        action="rejected",
        task_id=task.task_id,
        decision_id=decision_id,
        reviewer=decision.reviewer,
        reason=decision.reason,
        note=decision.note,
    )
    made = made.model_copy(update={"lineage": made.lineage.model_copy(update={"review": review})})
    detail = f"{decision.reason}: {made.task_id}"
    return Outcome(ctx.status(STAGE, decision_id, "done", "replaced", detail), {"tasks": [made]})


REVISION_STAGE = LLMStage(
    STAGE,
    pending_revisions,
    load_revisions,
    revise_one,
    help="replace each task a reviewer rejected with a new one from its source",
)
