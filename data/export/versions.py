"""The versions of a taskset on disk: `<taskset>/vNNNN/` folders and the `latest` link, how a
version is named on the command line, and what its manifest records.

A version written to wait for approval (a scheduled run with the publish gate) holds the
`AWAITING_APPROVAL` file and is not `latest` until it is approved (`approve_version`); a
rejected one is renamed `vNNNN.rejected`, out of the versions (`reject_version`)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

AWAITING_APPROVAL = "AWAITING_APPROVAL"


def awaits_approval(version: Path) -> bool:
    return (version / AWAITING_APPROVAL).is_file()


def approve_version(version: Path) -> None:
    """Publish a version that waited for approval: it becomes its taskset's `latest`."""
    (version / AWAITING_APPROVAL).unlink(missing_ok=True)
    point_latest(version.parent, version.name)


def reject_version(version: Path) -> Path:
    """Set a version that waited for approval aside as `vNNNN.rejected` (kept for a look, never
    `latest`, not a version any more: the next export takes its number again); its new path."""
    aside = version.with_name(f"{version.name}.rejected")
    n = 1
    while aside.exists():
        n += 1
        aside = version.with_name(f"{version.name}.rejected-{n}")
    version.rename(aside)
    return aside


def latest_version(root: Path) -> Path | None:
    """The newest version folder of the taskset at `root` (None: it has none)."""
    versions = taskset_versions(root)
    return versions[-1] if versions else None


def taskset_versions(root: Path) -> list[Path]:
    """The version folders of the taskset at `root`, oldest first."""
    return sorted(p for p in root.glob("v[0-9][0-9][0-9][0-9]") if p.is_dir())


def previous_version(version: Path) -> Path | None:
    """The version of the same taskset written before `version` (None: it is the first)."""
    version = version.resolve()
    earlier = [v for v in taskset_versions(version.parent) if v.name < version.name]
    return earlier[-1] if earlier else None


def named_version(name: str, tasksets: Path, taskset: str) -> Path:
    """The version `name` means: a folder (a version, or a taskset's `latest`), else
    `<taskset>/<version>` or a version of `taskset` under `tasksets`."""
    if Path(name).exists():
        return taskset_version(Path(name))
    return taskset_version(tasksets / name if "/" in name else tasksets / taskset / name)


def taskset_version(path: Path) -> Path:
    """The version folder `path` names: a version itself, or a taskset's `latest`."""
    if (path / "manifest.json").is_file():
        return path
    if (path / "latest" / "manifest.json").is_file():
        return (path / "latest").resolve()
    raise FileNotFoundError(f"{path} is neither a taskset version nor a taskset with `latest`")


def version_number(path: Path) -> int:
    """`v0012` -> 12."""
    return int(re.sub(r"\D", "", path.name))


def search_turns(version: Path) -> int | None:
    """The doc-search harness's turn limit taskset `version` was calibrated with, as its
    manifest records it with the corpus (None: not recorded)."""
    recorded = (read_manifest(version).get("corpus") or {}).get("max_turns")
    return int(recorded) if recorded else None


def read_manifest(version_dir: Path) -> dict[str, Any]:
    """A version's manifest ({} where it has none that reads)."""
    try:
        return json.loads((version_dir / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def read_tasks(version: Path, split: str | None = None) -> pa.Table:
    """The tasks of taskset `version` (only those of `split`, if given) in task order, from the
    parquet files its manifest lists: one or more per split (`data/<split>-NNNNN.parquet`), or
    the `part-NNNNN.parquet` files of a version written before splits were files."""
    manifest = json.loads((version / "manifest.json").read_text())
    split_files = (manifest.get("split") or {}).get("files")
    names = split_files.get(split, []) if split and split_files else manifest["files"]
    tables = [pq.read_table(version / name) for name in names]
    if not tables:  # a split without tasks has no file
        return pq.read_schema(version / manifest["files"][0]).empty_table()
    table = pa.concat_tables(tables)
    if split and not split_files:
        table = table.filter(pc.equal(table["split"], split))
    return table.sort_by("task_id")


def point_latest(root: Path, version: str) -> None:
    """Point the taskset's `latest` link at `version`, replacing it atomically."""
    link = root / "latest"
    tmp = root / f".latest.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(version)
    os.replace(tmp, link)
