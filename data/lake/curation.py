"""Curation by people: the review queue, a task's full record, and reviewers' decisions.

A decision (accept, reject with a reason, or edit) is appended to the lake's `decisions`
table with who made it and when, never overwritten; the latest decision on a task holds. An
edit makes a new task (the instruction, answer or rubric items changed; its lineage names
the original and the decision) that goes through verification and calibration again before
an export can carry it, and which replaces the original. The export leaves out rejected and
edited-away tasks, and with `[review] required = true` takes accepted tasks only
(`export_filter`). The next run (or loop round) acts on them in its `revise` stage
(`flows.revision`): it writes each edited task, and makes each rejection a rubric item of the
task and a replacement from the same source whose lineage names the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from data.lake.records import (
    Decision,
    Lineage,
    Message,
    ReviewRef,
    RubricItem,
    Task,
    content_id,
    utcnow,
)
from data.lake.stage_funnel import MEASURED_BY
from data.lake.store import Lake

REJECTION_REASONS = {
    "wrong_answer": "the reference answer is wrong",
    "unanswerable": "the source does not answer it",
    "ambiguous": "more than one answer is right",
    "leaks_answer": "the instruction gives the answer away",
    "trivial": "nothing to learn from it",
    "broken_verifier": "the verifier scores attempts wrongly",
    "other": "see the note",
}
STATES = ("unreviewed", "accepted", "rejected", "edited")
_FAMILY = "coalesce(json_extract_string({t}.lineage, '$.repair.root'), {t}.task_id)"
EDITABLE = ("instruction", "answer", "rubric_items")
PAGE_SIZE = 50
# one shard a decision: past this many, they are rewritten as one (every decision kept), so
# a day of reviewing does not leave thousands of files for every query to open
MAX_DECISION_SHARDS = 64

# the decision that holds on each task: its latest
LATEST_SQL = """SELECT * FROM decisions
QUALIFY row_number() OVER (PARTITION BY task_id ORDER BY decided_at DESC, decision_id DESC) = 1"""


def export_filter(required: str) -> str:
    """The SQL condition on task `t` an export applies. A decision holds for the task's whole
    repair family (its variants share its answer and evidence): a family with a rejected or
    edited task is exported only through a task an edit made, and never through a task
    rejected or replaced itself. Where parameter `required` (e.g. `$6`) is true, only tasks a
    person accepted, or an edit made, are exported."""
    return f"""t.task_id NOT IN (
        SELECT task_id FROM ({LATEST_SQL}) WHERE decision IN ('reject', 'edit'))
      AND ({_FAMILY.format(t="t")} NOT IN (
            SELECT {_FAMILY.format(t="x")} FROM tasks x
            JOIN ({LATEST_SQL}) l ON l.task_id = x.task_id WHERE l.decision IN ('reject', 'edit'))
           OR t.task_id IN (SELECT edited_task_id FROM ({LATEST_SQL}) WHERE decision = 'edit'))
      AND (NOT {required} OR t.task_id IN (
        SELECT task_id FROM ({LATEST_SQL}) WHERE decision = 'accept'
        UNION ALL SELECT edited_task_id FROM ({LATEST_SQL}) WHERE decision = 'edit'))"""


def review_states(lake: Lake) -> dict[str, str]:
    """Each reviewed task's state (`accepted`, `rejected`, `edited`), a task an edit made
    counting as accepted."""
    states = {"accept": "accepted", "reject": "rejected", "edit": "edited"}
    latest = lake.rows(f"SELECT task_id, decision, edited_task_id FROM ({LATEST_SQL})")
    found = {r["task_id"]: states[r["decision"]] for r in latest}
    found |= {r["edited_task_id"]: "accepted" for r in latest if r["edited_task_id"]}
    return found


_QUEUE_SQL = f"""
WITH latest AS ({LATEST_SQL}),
agreement AS (SELECT task_id, min(agreement) AS agreement FROM consensus GROUP BY task_id),
queue AS (
    SELECT t.task_id, t.kind, d.band, d.pass_rate, d.ci_low, d.ci_high, d.n,
           a.agreement, coalesce(r.hackable, false) AS hackable,
           left(list_filter(t.prompt, lambda m: m.role = 'user')[-1].content, 200) AS instruction,
           CASE l.decision WHEN 'accept' THEN 'accepted' WHEN 'reject' THEN 'rejected'
                WHEN 'edit' THEN 'edited' ELSE 'unreviewed' END AS state,
           l.reason, l.reviewer
    FROM tasks t
    JOIN status s ON s.item_id = t.task_id AND s.stage = 'calibrate' AND s.status = 'done'
    JOIN difficulty d ON d.task_id = t.task_id AND {MEASURED_BY}
    LEFT JOIN agreement a ON a.task_id = t.task_id
    LEFT JOIN reviews r ON r.task_id = t.task_id
    LEFT JOIN latest l ON l.task_id = t.task_id
    {{only}}
)
"""


@dataclass(frozen=True)
class QueueFilter:
    """Which tasks the queue shows: by family (`kind`), band, judge agreement (`split`: the
    panel disagreed on a check; `unanimous`; `unjudged`: no panel, e.g. code), hack flag and
    reviewer state ("" for any)."""

    kind: str = ""
    band: str = ""
    agreement: str = ""
    hackable: str = ""  # "yes", "no" or ""
    state: str = ""

    def where(self) -> tuple[str, list[Any]]:
        clauses, params = [], []
        for column, value in (("kind", self.kind), ("band", self.band), ("state", self.state)):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        if self.agreement == "split":
            clauses.append("agreement < 1")
        elif self.agreement == "unanimous":
            clauses.append("agreement = 1")
        elif self.agreement == "unjudged":
            clauses.append("agreement IS NULL")
        if self.hackable in ("yes", "no"):
            clauses.append("hackable" if self.hackable == "yes" else "NOT hackable")
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def queue(
    lake: Lake, where: QueueFilter, offset: int = 0, limit: int = PAGE_SIZE
) -> dict[str, Any]:
    """One page of the review queue (calibrated tasks, unreviewed first) and the number of
    tasks the filter matches; also each filter's choices, for the page's menus."""
    clause, params = where.where()
    order = " ORDER BY state <> 'unreviewed', kind, task_id"
    page = lake.rows(
        f"{_QUEUE_SQL.format(only='')} SELECT *, count(*) OVER () AS total FROM queue{clause}"
        f"{order} LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )
    total = page[0]["total"] if page else _count(lake, clause, params)
    kinds = lake.rows("SELECT list(DISTINCT kind ORDER BY kind) AS v FROM tasks")[0]["v"]
    bands = lake.rows("SELECT list(DISTINCT band ORDER BY band) AS v FROM difficulty")[0]["v"]
    return {
        "tasks": [{k: v for k, v in row.items() if k != "total"} for row in page],
        "total": total,
        "offset": offset,
        "kinds": kinds or [],
        "bands": bands or [],
    }


def _count(lake: Lake, clause: str, params: list[Any]) -> int:
    """The tasks a filter matches (for a page past the end, which has no row to say it)."""
    sql = f"{_QUEUE_SQL.format(only='')} SELECT count(*) AS n FROM queue{clause}"
    return lake.rows(sql, params)[0]["n"]


def task_record(lake: Lake, task_id: str) -> dict[str, Any] | None:
    """Everything a reviewer looks at for one task: the task (instruction, answer, verifier,
    evidence or workspace, lineage), its pass rate with its interval, the judges' verdicts with
    their reasons, its rubric items, hack flag, and every decision on it, oldest first."""
    tasks = lake.records("tasks", "task_id = ?", [task_id])
    if not tasks:
        return None
    task: Task = tasks[0]
    row = task.to_row()
    measured = lake.rows(
        f"{_QUEUE_SQL.format(only='WHERE t.task_id = $1')} SELECT band, pass_rate, ci_low,"
        " ci_high, n, agreement, hackable, state FROM queue",
        [task_id],
    )
    return {
        "task_id": task.task_id,
        "kind": task.kind,
        "instruction": task.question,
        "prompt": [m.model_dump() for m in task.prompt],
        "answer": task.answer,
        "verifier": json.loads(row["verifier"]),
        "evidence": json.loads(row["evidence"]),
        "source": json.loads(row["source"]),
        "workspace": json.loads(row["workspace"]) if task.workspace else None,
        "lineage": json.loads(row["lineage"]),
        "difficulty": measured[0] if measured else None,
        "verdicts": lake.rows(
            'SELECT "check", judge, judge_model, decision, confidence, reason FROM verdicts'
            ' WHERE task_id = ? ORDER BY "check", judge',
            [task_id],
        ),
        "rubric": [
            r["item"]
            for r in lake.rows(
                "SELECT item FROM rubrics WHERE task_id = ? ORDER BY rubric_id", [task_id]
            )
        ],
        "decisions": [
            {**d, "edits": json.loads(d["edits"])}
            for d in lake.rows(
                "SELECT * FROM decisions WHERE task_id = ? ORDER BY decided_at", [task_id]
            )
        ],
    }


class DecisionError(ValueError):
    """A decision that cannot be recorded, and why (the page shows it)."""


def decide(
    lake: Lake,
    task_id: str,
    decision: str,
    reviewer: str,
    *,
    reason: str = "",
    note: str = "",
    edits: dict[str, Any] | None = None,
) -> Decision:
    """Record `reviewer`'s `decision` on a task: accept, reject for `reason` (one of
    `REJECTION_REASONS`), or edit (`edits`: a new `instruction`, `answer` or `rubric_items`
    list; the edited task's id is recorded with the decision). One shard is written, the
    decisions compacted once they pass `MAX_DECISION_SHARDS`; the next run's `revise` stage
    writes what follows (the edited task, a rejection's rubric item and replacement). Raises
    `DecisionError` on anything else."""
    tasks = lake.records("tasks", "task_id = ?", [task_id])
    if not tasks:
        raise DecisionError(f"no task {task_id!r}")
    if not reviewer.strip():
        raise DecisionError("a decision needs the reviewer's name")
    task = tasks[0]
    now = utcnow()
    decision_id = content_id("decision", task_id, decision, reviewer, now.isoformat())
    edited: Task | None = None
    if decision == "reject":
        if reason not in REJECTION_REASONS:
            choices = ", ".join(REJECTION_REASONS)
            raise DecisionError(f"a rejection needs a reason: one of {choices}")
    elif decision == "edit":
        edited = edited_task(task, edits or {}, decision_id, reviewer, note)
    elif decision != "accept":
        raise DecisionError(f"unknown decision {decision!r}: accept, reject or edit")
    record = Decision(
        decision_id=decision_id,
        task_id=task_id,
        decision=decision,
        reason=reason if decision == "reject" else "",
        note=note.strip(),
        edits={k: v for k, v in (edits or {}).items() if k in EDITABLE} if edited else {},
        edited_task_id=edited.task_id if edited else "",
        reviewer=reviewer.strip(),
        decided_at=now,
    )
    lake.write("decisions", [record])
    if len(lake.shards("decisions")) > MAX_DECISION_SHARDS:
        lake.compact("decisions", lake.records("decisions"))
    return record


def edited_task(
    task: Task, edits: dict[str, Any], decision_id: str, reviewer: str, note: str
) -> Task:
    """`task` with the reviewer's `edits`: a new instruction (the last user message), answer or
    rubric (where its verifier has rubric items); a new task id, its lineage naming the
    original."""
    unknown = sorted(set(edits) - set(EDITABLE))
    if unknown:
        raise DecisionError(f"cannot edit {', '.join(unknown)}: only {', '.join(EDITABLE)}")
    instruction = str(edits.get("instruction", task.question)).strip()
    answer = str(edits.get("answer", task.answer)).strip()
    if not instruction or not answer:
        raise DecisionError("an edited task needs an instruction and an answer")
    verifier = task.verifier
    if "rubric_items" in edits:
        if not getattr(verifier, "rubric", None):
            raise DecisionError(f"this {task.kind} task's verifier has no rubric items to edit")
        items = [str(i).strip() for i in edits["rubric_items"] if str(i).strip()]
        if not items:
            raise DecisionError("an edited rubric needs at least one item")
        verifier = verifier.model_copy(update={"rubric": items})
    last_user = max(i for i, m in enumerate(task.prompt) if m.role == "user")
    prompt = [
        Message(role=m.role, content=instruction) if i == last_user else m
        for i, m in enumerate(task.prompt)
    ]
    review = ReviewRef(
        action="edited", task_id=task.task_id, decision_id=decision_id, reviewer=reviewer, note=note
    )
    lineage: Lineage = task.lineage.model_copy(update={"review": review})
    task_id = Task.make_id(
        task.kind, prompt, answer, verifier, task.workspace, task.environment, task.world
    )
    if task_id == task.task_id:
        raise DecisionError("the edit changes nothing")
    return task.model_copy(
        update={
            "task_id": task_id,
            "prompt": prompt,
            "answer": answer,
            "verifier": verifier,
            "lineage": lineage,
        }
    )


def rejection_rubric(decision: Decision) -> RubricItem:
    """A rejection as a rubric item of the rejected task: what the reviewer found wrong."""
    said = REJECTION_REASONS[decision.reason]
    return RubricItem(
        rubric_id=content_id("rubric", decision.decision_id),
        task_id=decision.task_id,
        item=f"not {decision.reason}: {said}" + (f" ({decision.note})" if decision.note else ""),
        category=f"reviewer:{decision.reason}",
        failure=decision.note or said,
        attempt_id=decision.decision_id,
        judge_model=f"reviewer:{decision.reviewer}",
        prompt_version="curation",
    )


def latest_decisions(lake: Lake, task_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The decision that holds on each of `task_ids` that has one."""
    rows = lake.rows(
        f"SELECT task_id, decision, reason, note, reviewer, decided_at FROM ({LATEST_SQL})"
        " WHERE list_contains(?, task_id)",
        [task_ids],
    )
    return {r.pop("task_id"): r for r in rows}
