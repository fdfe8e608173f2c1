"""The `revise` stage: what reviewers decided on the curation page (`foundry curate`) turned
into tasks.

- An edit: the edited task is written (its id is the one the decision recorded), to be
  verified, calibrated and reviewed like any other before an export can carry it.
- A rejection: the task gets a rubric item saying what was wrong
  (`data.lake.curation.rejection_rubric`), and a new task from the same source at the same level
  replaces it, as `foundry loop` replaces what a policy failed: its lineage names the
  rejection (`review`: the task, the reason, the reviewer's note) the way a steered task names
  the failure it targets.

Each decision is one item, taken once, while it is still the task's latest.
"""

from __future__ import annotations

from dataclasses import dataclass

from data.lake import LATEST_SQL, Decision, ReviewRef, edited_task, rejection_rubric
from data.llm import LLMClient
from families import family_of
from families.stage import LLMStage, Outcome, StageContext, pending_items
from flows.review_stages import EDITED, REPLACED, ToRepair, load_repair_material
from generators.checks import CheckFailure

STAGE = "revise"


def pending_revisions(ctx: StageContext) -> list[str]:
    """The edits and rejections (decision ids) not acted on yet that still hold."""
    sql = (
        f"SELECT decision_id AS id FROM ({LATEST_SQL})"
        " WHERE decision IN ('edit', 'reject') ORDER BY id"
    )
    return pending_items(ctx, STAGE, sql)


@dataclass(frozen=True)
class ToRevise:
    decision: Decision
    repair: ToRepair  # the task decided on, with what a new task from its source draws on


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
    decision, task = loaded.decision, loaded.repair.task
    if decision.decision == "edit":
        edited = edited_task(task, decision.edits, decision_id, decision.reviewer, decision.note)
        status = ctx.status(STAGE, decision_id, "done", EDITED, edited.task_id)
        return Outcome(status, {"tasks": [edited]})
    rubric = {"rubrics": [rejection_rubric(decision)]}
    try:
        made = await family_of(task.kind).sibling(task, loaded.repair.material, client, ctx)
    except CheckFailure as failure:
        status = ctx.status(STAGE, decision_id, "done", "no_replacement", failure.reason)
        return Outcome(status, rubric)
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
    status = ctx.status(STAGE, decision_id, "done", REPLACED, detail)
    return Outcome(status, {**rubric, "tasks": [made]})


REVISION_STAGE = LLMStage(
    STAGE,
    pending_revisions,
    load_revisions,
    revise_one,
    help="write reviewers' edits; replace each task a reviewer rejected with a new one",
)
