"""The bundled sample repositories, each kept as its git patch series under `data/samples/` and
rebuilt with fixed identities and dates, so its commit ids are the same on every machine and no
network is needed: `ledgerline`, a small Python package tested with pytest, `parcelrate`, a
small JavaScript package tested with Node's test runner, and `tabshare`, a small TypeScript
package that Node 24 runs by type stripping alone, tested with Node's test runner too."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from data.repos.git_cli import git

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


@dataclass(frozen=True)
class SampleRepo:
    """A bundled repository: its patch series and who committed it."""

    name: str
    patches: Path
    committer: tuple[str, str]  # name, email


LEDGERLINE = SampleRepo("ledgerline", SAMPLES / "repo", ("Mara Ellison", "mara@ledgerline.example"))
PARCELRATE = SampleRepo(
    "parcelrate", SAMPLES / "parcelrate", ("Noor Castell", "noor@parcelrate.example")
)
TABSHARE = SampleRepo("tabshare", SAMPLES / "tabshare", ("Ilse Marrow", "ilse@tabshare.example"))


def build_sample_repo(dest: Path, sample: SampleRepo = LEDGERLINE) -> Path:
    """Create `sample` at `dest` (a new folder) and return it."""
    dest.mkdir(parents=True)
    git(dest, "init", "--quiet", "--initial-branch=main")
    name, email = sample.committer
    committer = {"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}
    for patch in sorted(sample.patches.glob("*.patch")):
        git(dest, "am", "--quiet", "--committer-date-is-author-date", str(patch), env=committer)
    return dest
