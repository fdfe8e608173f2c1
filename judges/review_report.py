"""What the review stage found across the lake: rubrics, reward hacks, remedies."""

from __future__ import annotations

from typing import Any

from data.lake import Lake
from judges.review import NOT_EXTRACTED


def review_report(lake: Lake) -> dict[str, Any]:
    """Counts of reviewed tasks, rubric items, audited attempts, hack votes and remedies."""
    reviews = lake.rows(
        "SELECT count(*) AS reviewed,"
        " count(*) FILTER (WHERE rubric_items > 0) AS with_rubric,"
        " coalesce(sum(rubric_items), 0)::BIGINT AS rubric_items,"
        " count(*) FILTER (WHERE rubric_error <> '' AND NOT starts_with(rubric_error, ?))"
        " AS rubric_errors,"
        " count(*) FILTER (WHERE starts_with(rubric_error, ?)) AS rubric_not_extracted,"
        " coalesce(sum(checked_attempts), 0)::BIGINT AS audited_attempts,"
        " count(*) FILTER (WHERE hackable) AS hackable"
        " FROM reviews",
        [NOT_EXTRACTED, NOT_EXTRACTED],
    )[0]
    remedies = lake.rows(
        "SELECT remedy, count(*) AS n FROM reviews WHERE hackable GROUP BY remedy ORDER BY remedy"
    )
    votes = lake.rows(
        "SELECT decision, count(*) AS n FROM hack_verdicts GROUP BY decision ORDER BY decision"
    )
    patterns = lake.rows(
        "SELECT pattern, count(*) AS n FROM hack_verdicts WHERE decision = 'hack'"
        " GROUP BY pattern ORDER BY pattern"
    )
    return {
        **reviews,
        "remedies": {r["remedy"]: r["n"] for r in remedies},
        "hack_votes": {r["decision"]: r["n"] for r in votes},
        "hack_patterns": {r["pattern"]: r["n"] for r in patterns},
    }


def format_review_report(report: dict[str, Any]) -> str:
    def pairs(counts: dict[str, int]) -> str:
        return ", ".join(f"{k}={v}" for k, v in counts.items()) or "-"

    return "\n".join(
        [
            f"review: {report['reviewed']} tasks; rubric items {report['rubric_items']}"
            f" on {report['with_rubric']} tasks"
            f" ({report['rubric_errors']} unusable rubric replies;"
            f" {report['rubric_not_extracted']} not extracted, every judge below its control bar)",
            f"reward hacks: {report['audited_attempts']} rewarded non-gold attempts audited;"
            f" votes {pairs(report['hack_votes'])}; patterns {pairs(report['hack_patterns'])}",
            f"hackable tasks: {report['hackable']} (remedies: {pairs(report['remedies'])})",
        ]
    )
