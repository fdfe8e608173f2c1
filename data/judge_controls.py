"""The judges' latest accuracy on control items (`judges.controls`), for stats and the report."""

from __future__ import annotations

from typing import Any

from data.lake import Lake


def latest_controls(lake: Lake) -> list[dict[str, Any]]:
    """Per judge role, its latest control figures, by role."""
    return lake.rows(
        "SELECT role, model, items, correct, unanswered, accuracy, threshold, competent"
        " FROM judge_controls QUALIFY row_number() OVER (PARTITION BY role"
        " ORDER BY recorded_at DESC) = 1 ORDER BY role"
    )
