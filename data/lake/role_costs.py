"""What the live LLM calls cost, per stage and per family, and per accepted task (a task the
judges verified).

Each call records its stage and the item it was made for (`LLMCall.stage`, `.item`). A call
made for a task (verifying, calibrating, reviewing, repairing it) is that task's kind's; a
call of a generation stage is shared among the kinds the families running that stage make
(`made_by`), in proportion to the tasks of each kind in the lake; anything else (the judges'
control items, naming intents, calls recorded before calls named their stage) is `shared`,
counted in the totals but in no family.

A model with no price makes the cost of every row its calls fall in unknown (`data.costs.cost`):
`cost_usd` and `usd_per_accepted_task` null, with the part at known prices as
`cost_usd_at_least` and `usd_per_accepted_task_at_least`, and the models in `unpriced_models`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from data.costs import PRICED_SQL, UNPRICED_SQL, Cost, row_cost
from data.html_page import table
from data.lake.store import Lake

SHARED = "shared"

_CALLS_SQL = f"""
SELECT c.stage, t.kind, count(*) AS calls, sum(c.prompt_tokens + c.completion_tokens) AS tokens,
       {PRICED_SQL} AS priced_usd, {UNPRICED_SQL} AS unpriced
FROM llm_calls c LEFT JOIN tasks t ON t.task_id = c.item
WHERE NOT c.cached GROUP BY ALL ORDER BY ALL
"""
_ACCEPTED_SQL = """
SELECT t.kind, count(*) AS n FROM tasks t
JOIN status s ON s.item_id = t.task_id AND s.stage = 'verify' AND s.status = 'done'
GROUP BY t.kind
"""


@dataclass(frozen=True)
class Spent:
    """Live calls, their tokens and their cost, summed over a group of calls."""

    calls: float = 0.0
    tokens: float = 0.0
    cost: Cost = Cost()

    def __add__(self, other: Spent) -> Spent:
        return Spent(self.calls + other.calls, self.tokens + other.tokens, self.cost + other.cost)

    def scaled(self, share: float) -> Spent:
        return Spent(self.calls * share, self.tokens * share, self.cost.scaled(share))


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
    stages: dict[str, Spent] = defaultdict(Spent)
    families: dict[str, Spent] = defaultdict(Spent)
    for row in rows:
        stage = row["stage"] or "(not recorded)"
        spent = Spent(float(row["calls"]), float(row["tokens"] or 0), row_cost(row))
        stages[stage] += spent
        for kind, share in _shares(row, made_by, tasks).items():
            families[kind] += spent.scaled(share)
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


def _figures(head: dict[str, Any], spent: Spent, accepted: int) -> dict[str, Any]:
    per_task = spent.cost.scaled(1 / accepted).to_json() if accepted else {}
    return {
        **head,
        "calls": round(spent.calls, 1),
        "tokens": round(spent.tokens),
        **spent.cost.to_json(),
        "usd_per_accepted_task": per_task.get("cost_usd"),
        "usd_per_accepted_task_at_least": per_task.get("cost_usd_at_least"),
    }


def format_breakdown(breakdown: dict[str, Any]) -> str:
    """The two tables as text."""
    lines = ["cost per accepted task, by stage (all accepted tasks) and by family (its own):"]
    for label, rows in (("stage", breakdown["per_stage"]), ("family", breakdown["per_family"])):
        for row in rows:
            per = row["usd_per_accepted_task_at_least"]
            per_task = Cost.of(per, row["unpriced_models"]).text() if per is not None else ""
            lines.append(
                f"  {label} {row[label]:<18} {row['calls']:>8.0f} calls {row['tokens']:>10,} tokens"
                f" {Cost.from_json(row).text()}"
                + (f", {per_task} per accepted task" if per_task else "")
            )
    return "\n".join(lines)


def breakdown_html(breakdown: dict[str, Any] | None) -> str:
    """The two tables for an HTML page ("" where there is nothing to show)."""
    if not breakdown or not breakdown["per_stage"]:
        return ""
    header = ["calls", "tokens", "USD", "USD per accepted task"]
    numeric = ["", *["num"] * len(header)]
    return (
        "<h3>Cost per accepted task, by stage and by family</h3>"
        + table(
            ["stage", *header],
            [[r["stage"], *_cells(r)] for r in breakdown["per_stage"]],
            numeric,
        )
        + table(
            ["family", *header],
            [[r["family"], *_cells(r)] for r in breakdown["per_family"]],
            numeric,
        )
    )


def _cells(row: dict[str, Any]) -> list[Any]:
    """A row's calls, tokens, cost and cost per accepted task, unknown costs in words."""
    cost, per = row["cost_usd"], row["usd_per_accepted_task"]
    if cost is None:
        cost = Cost.from_json(row).text(6)
        at_least = row["usd_per_accepted_task_at_least"]
        per = Cost.of(at_least, row["unpriced_models"]).text(6) if at_least is not None else None
    return [row["calls"], row["tokens"], cost, per]
