"""A code task's repository tree at its base revision as one file, so that the task can be
graded without the repository: a gzipped tar that the export writes beside the taskset's parts
(`workspaces/`, one per repository and base revision) and an exported package unpacks for each
attempt. The tar is reproducible (sorted members, no times or owners) and keeps symlinks as
the checkout made them; unpacking takes only what stays inside the destination (the `data`
filter of `tarfile`: no absolute paths, links out or device files).

It imports nothing but the standard library: an exported package ships it as it is.
"""

from __future__ import annotations

import gzip
import os
import re
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FOLDER = "workspaces"


def bundle_name(workspace: Mapping[str, Any]) -> str:
    """The file name of the tree of a task's `workspace` (its repository and base revision)."""
    repo = re.sub(r"[^A-Za-z0-9._-]+", "_", str(workspace["repo_id"]))
    return f"{repo}-{workspace['base']}.tar.gz"


def pack(tree: Path, bundle: Path) -> None:
    """Write the files, folders and symlinks under `tree` to `bundle`, atomically."""
    tmp = bundle.with_name(f".{bundle.name}.tmp")
    with (
        open(tmp, "wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in sorted(_members(tree)):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(tree).as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if info.isreg():
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    os.replace(tmp, bundle)


def unpack(bundle: Path, dest: Path) -> Path:
    """The tree in `bundle` written to `dest` (created); raises tarfile's FilterError for a
    member that would land outside it."""
    if not hasattr(tarfile, "data_filter"):
        raise RuntimeError("unpacking a workspace safely needs Python 3.11.4 or later")
    dest.mkdir(parents=True)
    with tarfile.open(bundle, mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
    return dest


def is_node_project(bundle: Path) -> bool:
    """Whether the tree in `bundle` is a Node project (a `package.json` at its root): its tests
    need Node.js."""
    with tarfile.open(bundle, mode="r:gz") as tar:
        return "package.json" in tar.getnames()


def _members(tree: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(tree):
        base = Path(folder)
        found += [base / name for name in dirs + files]
    return found
