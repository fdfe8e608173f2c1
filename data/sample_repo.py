"""The bundled sample repository: `ledgerline`, a small Python package with tests, kept as its
git patch series in `data/samples/repo/` and rebuilt with fixed identities and dates, so its
commit ids are the same on every machine and no network is needed."""

from __future__ import annotations

from pathlib import Path

from data.git import git

PATCHES = Path(__file__).resolve().parent / "samples" / "repo"
COMMITTER = {"GIT_COMMITTER_NAME": "Mara Ellison", "GIT_COMMITTER_EMAIL": "mara@ledgerline.example"}


def build_sample_repo(dest: Path) -> Path:
    """Create the sample repository at `dest` (a new folder) and return it."""
    dest.mkdir(parents=True)
    git(dest, "init", "--quiet", "--initial-branch=main")
    for patch in sorted(PATCHES.glob("*.patch")):
        git(dest, "am", "--quiet", "--committer-date-is-author-date", str(patch), env=COMMITTER)
    return dest
