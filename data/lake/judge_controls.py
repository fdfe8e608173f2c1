"""The judges' figures the lake holds, for stats, the report and the manifest: their accuracy on
control items (`judges.controls`), and the rule that a panel decision has an agreement figure
only where more than one judge voted (a lone vote agrees with itself: no evidence)."""

from __future__ import annotations

from typing import Any

from data.lake.store import Lake

# a consensus row's agreement, or NULL where fewer than two judges voted
AGREEMENT_SQL = "CASE WHEN passes + fails > 1 THEN agreement END"


def latest_controls(lake: Lake) -> list[dict[str, Any]]:
    """Per judge role, its latest control figures, by role."""
    return lake.rows(
        "SELECT role, model, items, correct, unanswered, accuracy, threshold, competent"
        " FROM judge_controls QUALIFY row_number() OVER (PARTITION BY role"
        " ORDER BY recorded_at DESC) = 1 ORDER BY role"
    )


def controls_by_judge(lake: Lake) -> dict[tuple[str, str], dict[str, Any]]:
    """Per judge (role, model), the latest control figures measured for that model."""
    rows = lake.rows(
        "SELECT role, model, items, correct, accuracy, threshold, competent FROM judge_controls"
        " QUALIFY row_number()"
        " OVER (PARTITION BY role, model ORDER BY recorded_at DESC) = 1"
    )
    return {(row.pop("role"), row.pop("model")): row for row in rows}
