"""What the live LLM calls cost, per stage and per family, and per accepted task (a task the
judges verified).

Each call records its stage and the item it was made for (`LLMCall.stage`, `.item`). A call
made for a task (verifying, calibrating, reviewing, repairing it) is that task's kind's; a
call of a generation stage is shared among the kinds the families running that stage make
(`made_by`), in proportion to the tasks of each kind in the lake; anything else (the judges'
control items, naming intents, calls recorded before calls named their stage) is `shared`,
counted in the totals but in no family.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from data.html_page import table
from data.lake import Lake

SHARED = "shared"

_CALLS_SQL = """
SELECT c.stage, t.kind, count(*) AS calls, sum(c.prompt_tokens + c.completion_tokens) AS tokens,
       sum(c.cost_usd) AS cost_usd
FROM llm_calls c LEFT JOIN tasks t ON t.task_id = c.item
WHERE NOT c.cached GROUP BY ALL ORDER BY ALL
"""
_ACCEPTED_SQL = """
SELECT t.kind, count(*) AS n FROM tasks t
JOIN status s ON s.item_id = t.task_id AND s.stage = 'verify' AND s.status = 'done'
GROUP BY t.kind
"""


def cost_breakdown(lake: Lake, made_by: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Live spend per stage and per family (task kind), each with its cost per accepted task;
    `made_by` maps each generation stage to the kinds its families make."""
    if not lake.shards("llm_calls"):
        return {"per_stage": [], "per_family": []}
    rows = lake.rows(_CALLS_SQL)
    accepted = {r["kind"]: r["n"] for r in lake.rows(_ACCEPTED_SQL)}
    tasks = {
        r["kind"]: r["n"] for r in lake.rows("SELECT kind, count(*) AS n FROM tasks GROUP BY kind")
    }
    total_accepted = sum(accepted.values())
    stages: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    families: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        stage = row["stage"] or "(not recorded)"
        spent = {key: float(row[key] or 0) for key in ("calls", "tokens", "cost_usd")}
        for key, value in spent.items():
            stages[stage][key] += value
        for kind, share in _shares(row, made_by, tasks).items():
            for key, value in spent.items():
                families[kind][key] += value * share
    return {
        "per_stage": [
            _figures({"stage": name}, spent, total_accepted)
            for name, spent in sorted(stages.items())
        ],
        "per_family": [
            _figures(
                {"family": kind, "accepted_tasks": accepted.get(kind, 0)},
                spent,
                accepted.get(kind, 0) if kind != SHARED else total_accepted,
            )
            for kind, spent in sorted(families.items())
        ],
    }


def _shares(
    row: dict[str, Any], made_by: Mapping[str, Sequence[str]], tasks: Mapping[str, int]
) -> dict[str, float]:
    """Which families a group of calls is charged to, and in what shares."""
    if row["kind"]:
        return {row["kind"]: 1.0}
    made = [kind for kind in made_by.get(row["stage"], ()) if tasks.get(kind)]
    if not made:
        return {SHARED: 1.0}
    total = sum(tasks[kind] for kind in made)
    return {kind: tasks[kind] / total for kind in made}


def _figures(head: dict[str, Any], spent: Mapping[str, float], accepted: int) -> dict[str, Any]:
    cost = spent["cost_usd"]
    return {
        **head,
        "calls": round(spent["calls"], 1),
        "tokens": round(spent["tokens"]),
        "cost_usd": round(cost, 6),
        "usd_per_accepted_task": round(cost / accepted, 6) if accepted else None,
    }


def format_breakdown(breakdown: dict[str, Any]) -> str:
    """The two tables as text."""
    lines = ["cost per accepted task, by stage (all accepted tasks) and by family (its own):"]
    for label, rows in (("stage", breakdown["per_stage"]), ("family", breakdown["per_family"])):
        for row in rows:
            per = row["usd_per_accepted_task"]
            lines.append(
                f"  {label} {row[label]:<18} {row['calls']:>8.0f} calls {row['tokens']:>10,} tokens"
                f" ${row['cost_usd']:.4f}"
                + (f", ${per:.4f} per accepted task" if per is not None else "")
            )
    return "\n".join(lines)


def breakdown_html(breakdown: dict[str, Any] | None) -> str:
    """The two tables for an HTML page ("" where there is nothing to show)."""
    if not breakdown or not breakdown["per_stage"]:
        return ""
    columns = ["calls", "tokens", "cost_usd", "usd_per_accepted_task"]
    header = ["calls", "tokens", "USD", "USD per accepted task"]
    numeric = ["", *["num"] * len(columns)]
    return (
        "<h3>Cost per accepted task, by stage and by family</h3>"
        + table(
            ["stage", *header],
            [[r["stage"], *(r[c] for c in columns)] for r in breakdown["per_stage"]],
            numeric,
        )
        + table(
            ["family", *header],
            [[r["family"], *(r[c] for c in columns)] for r in breakdown["per_family"]],
            numeric,
        )
    )
