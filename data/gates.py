"""The admission gates code tasks went through (`judges.unit_tests`), for stats, the report, the
manifest and the card: per gate, how many tasks it passed and kept out, how many it could not
be run for (those are kept out too, never counted as passed), and the shares it measured."""

from __future__ import annotations

from typing import Any, get_args

from data.lake import Lake
from data.records import GateName

GATE_ORDER: tuple[str, ...] = get_args(GateName)


def gate_rows(lake: Lake) -> list[dict[str, Any]]:
    """Per gate, in the order they are taken: tasks passed, failed (it ran and kept them
    out) and not run (it could not run, and kept them out), the mean share measured (fresh
    runs passed, mutants killed) and, for the fresh runs, how many were flaky (passed some
    runs, not all)."""
    rows = lake.rows(
        "SELECT gate, count(*) FILTER (WHERE passed AND ran IS NOT FALSE) AS passed,"
        " count(*) FILTER (WHERE NOT passed AND ran IS NOT FALSE) AS failed,"
        " count(*) FILTER (WHERE ran IS FALSE) AS not_run, avg(share) AS mean_share,"
        " count(*) FILTER (WHERE NOT passed AND share > 0) AS flaky"
        " FROM gates GROUP BY gate"
    )
    by_gate = {row["gate"]: row for row in rows}
    return [by_gate[gate] for gate in GATE_ORDER if gate in by_gate]


def format_gates(rows: list[dict[str, Any]]) -> str:
    """The gates as text, one line each."""
    if not rows:
        return "code admission gates: none taken (no code task verified)"
    lines = ["code admission gates (tasks passed / kept out / could not run, kept out):"]
    for row in rows:
        line = f"  {row['gate']}: {row['passed']} passed, {row['failed']} kept out"
        line += f", {row['not_run']} not run"
        if row["gate"] == "fresh_runs":
            line += f" ({row['flaky']} flaky)"
        if row["gate"] == "mutants" and row["mean_share"] is not None:
            line += f"; mean share of mutants killed {row['mean_share']:.0%}"
        lines.append(line)
    return "\n".join(lines)
