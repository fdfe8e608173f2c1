"""Reading back everything an export wrote, to look for what must not be published in it."""

from __future__ import annotations

import json
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def file_text(path: Path) -> str:
    """A file's content as text: a parquet file's rows as JSON (its pages are compressed), a
    `.tar.gz` bundle's member names and contents, anything else its bytes."""
    if path.suffix == ".parquet":
        return json.dumps(pq.read_table(path).to_pylist(), default=str)
    if path.name.endswith(".tar.gz"):
        with tarfile.open(path) as bundle:
            return "\n".join(
                member.name + "\n" + _member_text(bundle, member) for member in bundle.getmembers()
            )
    return path.read_bytes().decode("utf-8", errors="replace")


def _member_text(bundle: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    content = bundle.extractfile(member) if member.isfile() else None
    return content.read().decode("utf-8", errors="replace") if content else member.linkname


def machine_paths_in(folder: Path, machine_paths: Iterable[Path]) -> dict[str, list[str]]:
    """Each file under `folder` (a taskset version, projections included) that holds one of
    `machine_paths` (as given and resolved), with the paths it holds. Hidden entries are
    folders and files being written (renamed into place when whole), not yet exported."""
    needles = sorted({str(p) for path in machine_paths for p in (path, path.resolve())})
    found: dict[str, list[str]] = {}
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        if any(part.startswith(".") for part in file.relative_to(folder).parts):
            continue
        text = file_text(file)
        hits = [needle for needle in needles if needle in text]
        if hits:
            found[str(file.relative_to(folder))] = hits
    return found


def this_machines_paths(*more: Path) -> list[Path]:
    """The paths a run on this machine could leak: the repository, the working directory and
    the user's home (where it is not `/`), and `more` (the run's own folders)."""
    home = Path(os.path.expanduser("~"))
    return [
        Path(__file__).resolve().parent.parent,
        Path.cwd(),
        *([home] if home != Path("/") else []),
        *more,
    ]


def rewrite_tasks(version: Path, rows: list[dict]) -> None:
    """Put `rows` in place of a copied version's tasks: each split's rows into the first of its
    files the manifest lists, its other files emptied (a test's hand-edited version)."""
    from data.export import TASKSET_SCHEMA

    files = json.loads((version / "manifest.json").read_text())["split"]["files"]
    assert {row["split"] for row in rows} <= {split for split, names in files.items() if names}
    for split, names in files.items():
        kept = [row for row in rows if row["split"] == split]
        for i, name in enumerate(names):
            table = pa.Table.from_pylist(kept if i == 0 else [], schema=TASKSET_SCHEMA)
            pq.write_table(table, version / name)


def projected_rows(folder: Path) -> list[dict]:
    """A projection's rows: its `train.parquet`, then its `eval.parquet` where the eval split
    has rows."""
    files = [folder / f"{split}.parquet" for split in ("train", "eval")]
    return [row for path in files if path.exists() for row in pq.read_table(path).to_pylist()]
