"""The admission gates code tasks went through (`judges.unit_tests`), for stats, the report, the
manifest and the card: per gate, how many tasks it passed and kept out, how many it could not
be run for (those are kept out too, never counted as passed), and the shares it measured."""

from __future__ import annotations

from typing import Any, get_args

from data.lake.records import GateName
from data.lake.store import Lake

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


def version_gates(lake: Lake, task_ids: list[str]) -> dict[str, Any]:
    """The gates as a taskset version states them (its manifest and card): per gate, how many of
    the version's tasks passed it, each one it ran for (a task is exported only past gates that
    ran), and the lake's counts over every candidate (`gate_rows`)."""
    rows = lake.rows(
        "SELECT gate, count(*) AS passed FROM gates"
        " WHERE passed AND ran IS NOT FALSE AND list_contains(?, task_id) GROUP BY gate",
        [task_ids],
    )
    by_gate = {row["gate"]: row["passed"] for row in rows}
    tasks = {gate: by_gate[gate] for gate in GATE_ORDER if gate in by_gate}
    return {"tasks_passed": tasks, "candidates": gate_rows(lake)}


def gate_lines(gates: dict[str, Any]) -> str:
    """A version's gates (`version_gates`) as the card's lines."""
    if not gates["candidates"]:
        return "No code task was verified: no admission gate was taken."
    passed = ", ".join(f"{gate} {n}" for gate, n in gates["tasks_passed"].items()) or "-"
    lines = [f"- this version's code tasks that passed each gate, which ran for them: {passed}"]
    lines.append("- over every code candidate (passed / kept out / could not run, kept out):")
    for row in gates["candidates"]:
        lines.append(f"  {row['gate']} {row['passed']} / {row['failed']} / {row['not_run']}")
    return "\n".join(lines)
