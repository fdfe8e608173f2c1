"""Review of a calibrated task: rubric items from its failed attempts (answer and report
tasks, as its family's audit distils them), reward hacks among its rewarded ones as the audit
shows them to the panel, and the remedy when a hack is found. While every judge is below its
control bar, no rubric is extracted (the review records that it was not, as its
`rubric_error`: a record of failures, it decides nothing about the task), and a review that
must clear a suspicious attempt is held (`judges.panel.Held`)."""

from __future__ import annotations

from dataclasses import dataclass

from data.lake import Attempt, HackVerdict, Review, RubricItem, Task
from data.llm import LLMClient, LLMError
from judges import hacks
from judges.panel import Held

NOT_EXTRACTED = "not extracted"  # a review's `rubric_error` where no judge could distil one


@dataclass(frozen=True)
class ReviewResult:
    review: Review
    rubric: list[RubricItem]
    verdicts: list[HackVerdict]
    remedied: Task | None  # the task with a tighter verifier, to verify and calibrate again


async def _rubric(
    task: Task, attempts: list[Attempt], llm: LLMClient, audit: hacks.Audit
) -> list[RubricItem] | str:
    """The rubric, or why there is none: the judge's replies never fit the schema (recorded, not
    retried forever; transient errors still raise and the review is retried), or every judge is
    below its control bar (not extracted)."""
    try:
        return await audit.failure_rubric(task, attempts, llm)
    except Held as held:
        return f"{NOT_EXTRACTED}: {held}"[:200]
    except LLMError as error:
        if error.reason != "invalid_structured_output":
            raise
        return str(error)[:200]


async def review(
    task: Task, attempts: list[Attempt], llm: LLMClient, audit: hacks.Audit
) -> ReviewResult:
    """Extract the rubric (where `audit` does), mine reward hacks and, for a hackable task,
    find a remedy."""
    rubric = await _rubric(task, attempts, llm, audit) if audit.extracts_rubric else []
    items = rubric if isinstance(rubric, list) else []
    checked, verdicts, findings = await hacks.mine(task, attempts, llm, audit)
    remedy, remedied = "none_needed", None
    if findings:
        remedy, remedied = await audit.remedy(task, findings, [i.item for i in items], llm)
    record = Review(
        task_id=task.task_id,
        rubric_items=len(items),
        checked_attempts=len(checked),
        hack_attempts=[f.attempt.attempt_id for f in findings],
        hackable=bool(findings),
        remedy=remedy,
        remedied_task_id=remedied.task_id if remedied else "",
        rubric_error="" if isinstance(rubric, list) else rubric,
    )
    return ReviewResult(record, items, verdicts, remedied)
