"""Git repositories: each mirrored under the home and its commits recorded in the lake's
`repos` and `commits` tables (`data.repos`); the code families replay, rebuild and break them
in the sandbox. The bundled samples are two small repositories (Python and JavaScript),
rebuilt from their patch series the first time."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from data.repos import ingest_repo
from data.sample_repo import LEDGERLINE, PARCELRATE, SampleRepo, build_sample_repo
from data.splits import Grouping, Row, knobs_of
from families.stage import StageContext
from sources.base import Source


def ingest_repository(origin: str, rev: str | None, ctx: StageContext) -> Counter:
    """Mirror a git repository and record its commits (`data.repos`)."""
    return ingest_repo(origin, ctx.lake, ctx.config.home, ctx.run_id, rev, ctx.progress)


def _read(items: list[str], ctx: StageContext, options: Mapping[str, Any]) -> dict[str, Any]:
    """The repositories' outcomes, counted together (each one's is in the status table)."""
    counts: Counter = Counter()
    for origin in items:
        counts.update(ingest_repository(origin, options.get("rev"), ctx))
    return dict(counts)


def _sample_repo(ctx: StageContext, sample: SampleRepo) -> Path:
    """A bundled sample repository, built under the home the first time."""
    path = ctx.config.home / "samples" / sample.name
    return path if (path / ".git").is_dir() else build_sample_repo(path, sample)


def commit_keys(row: Row) -> list[str]:
    """A code task's commits: the one its workspace starts from and those it reproduces (a sha
    names its tree in any clone)."""
    workspace = json.loads(row.get("workspace") or "null")
    if not workspace:
        return []
    knobs = knobs_of(row)
    reproduced = [knobs.get("commit", ""), *str(knobs.get("commits", "")).split("+")]
    return [f"commit:{sha}" for sha in {workspace["base"], *filter(None, reproduced)}]


SOURCE = Source(
    name="repos",
    help="git repositories: paths or URLs",
    items="git repositories: paths or URLs",
    read=_read,
    tables=("repos",),
    grouping=Grouping(
        "code", "commit: the repository commits a task starts from or reproduces", commit_keys
    ),
    sample=lambda ctx: [str(_sample_repo(ctx, sample)) for sample in (LEDGERLINE, PARCELRATE)],
    options={"rev": "a git rev-list range, e.g. v1.0..main (default: HEAD)"},
    aliases=("repo",),
)
