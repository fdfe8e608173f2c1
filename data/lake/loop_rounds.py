"""The rounds of `foundry loop` the lake holds, for stats and the report page."""

from __future__ import annotations

from typing import Any

from data.lake.records import LoopRound
from data.lake.store import Lake


def loop_rows(lake: Lake, loop: str | None = None) -> list[dict[str, Any]]:
    """Every round of every loop (or of `loop`), by loop and round."""
    rows = lake.rows(
        "SELECT * FROM loop_rounds WHERE ? IS NULL OR loop = ? ORDER BY loop, round", [loop, loop]
    )
    return [LoopRound.from_row(row).model_dump(mode="json") for row in rows]


def _rate(value: float | None, interval: list[float]) -> str:
    if value is None:
        return "-"
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else f"{value:.3f}"


def format_rounds(rows: list[dict[str, Any]]) -> str:
    """The rounds as text: per round the taskset, the held-out pass rate before and after its
    training with intervals, and what the new policy's failures made."""
    if not rows:
        return "loop rounds: none (foundry loop)"
    lines = ["loop rounds (held-out pass rate of the round's policy, then of what it trained):"]
    for row in rows:
        change = row["difference"]
        interval = row["difference_ci"]
        delta = "" if change is None else f", change {change:+.3f}"
        if change is not None and interval:
            delta += f" [{interval[0]:+.3f}, {interval[1]:+.3f}]"
        targets = ", ".join(f"{kind} {n}" for kind, n in sorted(row["targets"].items()))
        lines += [
            f"  {row['loop']} round {row['round']}: {row['taskset']}, {row['train_tasks']} train"
            f" / {row['eval_tasks']} eval tasks",
            f"    {row['policy']}: {_rate(row['before'], row['before_ci'])}"
            f" -> {row['trained']}: {_rate(row['after'], row['after_ci'])}{delta}",
            f"    targets for the next round: {targets or 'none'};"
            f" {row['episodes']} rollouts ingested as traces",
        ]
    return "\n".join(lines)
