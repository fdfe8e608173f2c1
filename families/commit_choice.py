"""Which commits the replay and describe stages take first, so that `code.max_replays` spends
its room where tasks are likeliest.

Commits that can be replayed come first: a root commit, or one that does not change both source
and tests, is rejected without running anything and would only use up the cap. Within each of
the two groups the repositories take turns, each giving its newest commit not yet given: a
recent commit asks for the dependencies and test setup its repository has now, which the check
at HEAD has just run, so it is the likeliest to replay; consecutive recent commits chain into
commit-sequence tasks; and turns give every repository a share, so that one whose commits fail
cannot use up the whole cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from generators.commit_replay import unreplayable


def replay_order(commits: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ids (`repo_id:sha`) of `commits`, rows with `repo_id`, `sha`, `authored_at`, `kind`
    and `parent`, in the order they are taken: replayable first, then the repositories in turn,
    newest first (ties: the newer first, then by repository and sha)."""
    groups: dict[tuple[bool, str], list[tuple[datetime, str]]] = {}
    for commit in commits:
        unusable = unreplayable(commit["kind"], commit["parent"]) is not None
        when = datetime.fromisoformat(commit["authored_at"])
        groups.setdefault((unusable, commit["repo_id"]), []).append((when, commit["sha"]))
    keyed = [
        ((unusable, turn, -when.timestamp(), repo_id, sha), f"{repo_id}:{sha}")
        for (unusable, repo_id), dated in groups.items()
        for turn, (when, sha) in enumerate(sorted(dated, reverse=True))
    ]
    return [item for _, item in sorted(keyed)]
