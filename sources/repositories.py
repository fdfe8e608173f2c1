"""Git repositories: each mirrored under the home and its commits recorded in the lake's
`repos` and `commits` tables (`data.repos.ingest`); the code families replay, rebuild and break them
in the sandbox. The bundled samples are two small repositories (Python and JavaScript),
rebuilt from their patch series the first time."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from data.config import FoundryConfig
from data.export import Grouping, Row, knobs_of
from data.lake import Lake
from data.repos import (
    LEDGERLINE,
    PARCELRATE,
    GitError,
    SampleRepo,
    build_sample_repo,
    git,
    ingest_repo,
)
from families.stage import StageContext
from sources.base import Source


def ingest_repository(origin: str, rev: str | None, ctx: StageContext) -> Counter:
    """Mirror a git repository and record its commits (`data.repos.ingest`)."""
    return ingest_repo(origin, ctx.lake, ctx.config.home, ctx.run_id, rev, ctx.progress)


def _read(items: list[str], ctx: StageContext, options: Mapping[str, Any]) -> dict[str, Any]:
    """The repositories' outcomes, counted together (each one's is in the status table)."""
    counts: Counter = Counter()
    for origin in items:
        counts.update(ingest_repository(origin, options.get("rev"), ctx))
    return dict(counts)


# a remote repository's commits, which cannot be counted before it is cloned: a guess, for
# estimates only (`foundry run --plan` states its range)
REMOTE_COMMITS = 100


def estimate_commits(items: list[str], config: FoundryConfig, lake: Lake) -> int:
    """The commits of the repositories `items` the lake does not hold yet: counted in a local
    clone, guessed for a remote one (`REMOTE_COMMITS`)."""
    held = {
        r["origin"]: r["n"]
        for r in lake.rows(
            "SELECT r.origin, count(c.sha) AS n FROM repos r"
            " LEFT JOIN commits c USING (repo_id) GROUP BY r.origin"
        )
    }
    commits = 0
    for origin in items:
        try:
            found = int(git(Path(origin), "rev-list", "--count", "HEAD").strip())
        except (GitError, OSError, ValueError):
            found = REMOTE_COMMITS
        commits += max(0, found - held.get(origin, 0))
    return commits


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
    unit_stage="replay",
    estimate=estimate_commits,
    unit_cap=lambda config: config.code.max_replays,
    options={"rev": "a git rev-list range, e.g. v1.0..main (default: HEAD)"},
    aliases=("repo",),
)
