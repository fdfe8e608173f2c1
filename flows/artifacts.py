"""Prefect artifacts of a pipeline run: what the run did, visible in the UI beside the run.

Keyed, so the UI keeps each key's history across runs: the funnel (per stage: items in, done,
rejected and failed, with reasons), the exported taskset's difficulty histogram and judge
agreement, LLM calls, tokens and cost per role for this run, the export itself, and what
changed since the version before it (`data.review.version_diff`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from data.costs import Cost
from data.export import histogram_lines, judge_text, previous_version
from data.lake import usage_by_role
from data.review import diff_versions, format_diff
from families.stage import StageContext

KEYS = (
    "foundry-funnel",
    "foundry-difficulty",
    "foundry-judges",
    "foundry-llm",
    "foundry-taskset",
    "foundry-diff",
)


def publish_run_artifacts(
    ctx: StageContext, export: dict[str, Any], stages: dict[str, dict[str, Any]]
) -> list[str]:
    """Create this run's artifacts from the funnel's `stages`, the lake and the export
    summary; returns their keys."""
    create_table_artifact(
        [
            {
                "stage": name,
                "items": stage["items"],
                "done": stage["done"],
                "rejected": stage["rejected"],
                "failed": stage["failed"],
                "reasons": ", ".join(f"{r} {n}" for r, n in sorted(stage["reasons"].items())),
            }
            for name, stage in stages.items()
            if stage["items"]
        ],
        key="foundry-funnel",
        description="Items per stage: done, rejected and failed, with reasons (whole lake)",
    )
    manifest = json.loads((Path(export["path"]) / "manifest.json").read_text())
    bands = ", ".join(f"{band} {n}" for band, n in manifest["by_band"].items())
    create_markdown_artifact(
        f"### {manifest['name']} {manifest['version']}: pass rate per task\n\n"
        f"{manifest['n_tasks']} tasks ({bands})\n\n"
        f"```\n{histogram_lines(manifest['difficulty_histogram'])}\n```\n",
        key="foundry-difficulty",
        description="The exported taskset's difficulty histogram",
    )
    create_table_artifact(
        [
            {
                **figures,
                "check": check,
                "judges": "; ".join(judge_text(judge) for judge in figures["judges"]),
            }
            for check, figures in manifest["judge_agreement"].items()
        ]
        or [{"check": "-", "decisions": 0, "judges": "", "mean_agreement": None}],
        key="foundry-judges",
        description=(
            "Judge panel decisions in the exported taskset, the judges that voted with their"
            " control figures, and the mean agreement where more than one judge voted"
        ),
    )
    create_table_artifact(
        [_usage_cells(row) for row in usage_by_role(ctx.lake, ctx.run_id)]
        or [{"role": "-", "calls": 0, "cache_hits": 0, "cost": "-"}],
        key="foundry-llm",
        description="This run's LLM calls, cache hits, errors, tokens and cost per role",
    )
    projections = "".join(
        f"- `{fmt}`: `{done['path']}` ({done['rows']} rows)\n"
        for fmt, done in export["projections"].items()
    )
    state = "written" if export["written"] else "unchanged (same as the latest version)"
    create_markdown_artifact(
        f"### Taskset `{export['path']}`\n\n{export['n_tasks']} tasks, {state}\n\n{projections}",
        key="foundry-taskset",
        description="Where this run's taskset version is, and its trainer projections",
    )
    version = Path(export["path"])
    before = previous_version(version)
    changes = diff_versions(before, version, ctx.lake) if before else None
    create_markdown_artifact(
        f"```\n{format_diff(changes)}\n```\n"
        if changes
        else f"{manifest['name']} {manifest['version']} is the first version: nothing to compare",
        key="foundry-diff",
        description="What changed since the previous version: tasks added, removed, changed",
    )
    return list(KEYS)


def _usage_cells(row: dict[str, Any]) -> dict[str, Any]:
    """A role's usage row for the table, its cost in words where part of it has no price."""
    cells = {k: v for k, v in row.items() if not k.startswith(("cost_usd", "unpriced"))}
    return {**cells, "cost": Cost.from_json(row).text(6)}
