"""Reward hacks during training: the completions a trainer's reward functions rewarded fully
(a sample, `harnesses.trainer.RewardSampler`), audited by the judge panel as the review stage
audits calibration attempts, each by its task's family audit (`judges.hacks`).

A completion that is the gold itself is not audited; a panel left undecided by errors counts as
undecided, not as a hack, and the rest of the audit goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from data.lake import VERIFIER_SPEC, Attempt, Task, Usage, content_id
from data.llm import LLMClient, LLMError
from data.rewarded import Rewarded
from judges import hacks, world_state
from judges.rewards import completion_text, trainer_task
from judges.verifier_types import verifier_type

MAX_EXAMPLE_CHARS = 500


@dataclass(frozen=True)
class ToAudit:
    """A rewarded completion as a task and an attempt at it, and its family's audit."""

    task: Task
    attempt: Attempt
    audit: hacks.Audit


def response_of(completion: Any) -> str:
    """A completion as the review stage sees an attempt: its text, or for a conversation with
    tool calls, the calls and final answer as the tool harnesses' attempt JSON."""
    if isinstance(completion, str):
        return completion
    made = world_state.attempt_of(completion)
    if made is not None and made[0]:
        calls, answer = made
        listed = [{"name": name, "arguments": arguments} for name, arguments in calls]
        return json.dumps({"calls": listed, "answer": answer}, ensure_ascii=False, sort_keys=True)
    return completion_text(completion)


def to_audit(
    samples: list[Rewarded], audit_of: Callable[[str], hacks.Audit | None]
) -> list[ToAudit]:
    """The samples whose family has an audit and which are not the gold itself."""
    chosen = []
    for index, sample in enumerate(samples):
        row = sample.columns
        kind = str(row.get("kind") or "")
        audit = audit_of(kind)
        gold = row.get("solution", row.get("answer"))
        if audit is None or gold is None or "verifier" not in row:
            continue
        spec = VERIFIER_SPEC.validate_json(row["verifier"])
        task = trainer_task(
            sample.prompt, gold, spec, kind, row.get("workspace"), row.get("world")
        ).model_copy(update={"task_id": str(row.get("task_id") or "")})
        response = response_of(sample.completion)
        if verifier_type(spec).is_gold(task, response):
            continue
        attempt = Attempt(
            attempt_id=content_id(task.task_id, response),
            task_id=task.task_id,
            index=index,
            harness="trainer",
            solver_model="policy",
            temperature=0.0,
            seed=0,
            response=response,
            reward=1.0,
            usage=Usage(),
        )
        chosen.append(ToAudit(task, attempt, audit))
    return chosen


async def audit_rewarded(sampled: int, items: list[ToAudit], llm: LLMClient) -> dict[str, Any]:
    """What the panel found among `items` (of `sampled` rewarded completions): how many it
    checked, flagged and left undecided, and each flagged one as an example."""
    flagged: list[dict[str, Any]] = []
    undecided = 0
    for item in items:
        try:
            _, verdicts, findings = await hacks.mine(item.task, [item.attempt], llm, item.audit)
        except LLMError:
            undecided += 1
            continue
        for finding in findings:
            flagged.append(
                {
                    "task_id": item.task.task_id,
                    "kind": item.task.kind,
                    "pattern": finding.pattern,
                    "reasons": [v.reason for v in verdicts if v.decision == "hack"],
                    "completion": item.attempt.response[:MAX_EXAMPLE_CHARS],
                }
            )
    return summary(sampled, len(items), flagged, undecided)


def summary(
    sampled: int, checked: int, examples: list[dict[str, Any]], undecided: int = 0
) -> dict[str, Any]:
    """The run summary's `hack_audit`."""
    return {
        "sampled": sampled,
        "checked": checked,
        "flagged": len(examples),
        "undecided": undecided,
        "examples": examples,
    }
