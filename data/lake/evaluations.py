"""The policies' held-out evaluations the lake holds (`foundry evaluate`), for stats and report."""

from __future__ import annotations

from typing import Any

from data.lake.store import Lake

COLUMNS = (
    "taskset, split, policy, policy_spec, k, tasks, missing, attempts, passes, pass_rate,"
    " ci_low, ci_high, confidence, recorded_at"
)


def evaluation_rows(lake: Lake) -> list[dict[str, Any]]:
    """Every evaluation, by taskset and split, in the order they were made."""
    return lake.rows(
        f"SELECT {COLUMNS} FROM evaluations ORDER BY taskset, split, recorded_at, policy"
    )


def format_evaluations(rows: list[dict[str, Any]]) -> str:
    """The evaluations as text, one line per policy under its taskset and split."""
    if not rows:
        return "held-out evaluations: none (foundry evaluate)"
    lines = ["held-out evaluations (pass rate over k attempts per task, Wilson interval):"]
    heading = None
    for row in rows:
        if (row["taskset"], row["split"]) != heading:
            heading = (row["taskset"], row["split"])
            lines.append(f"  {row['taskset']}, split {row['split']}:")
        missing = f", {row['missing']} not evaluated" if row["missing"] else ""
        lines.append(
            f"    {row['policy']}: {row['pass_rate']:.3f} [{row['ci_low']:.3f},"
            f" {row['ci_high']:.3f}] on {row['tasks']} tasks x {row['k']}{missing}"
        )
    return "\n".join(lines)
