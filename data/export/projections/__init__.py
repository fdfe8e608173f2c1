"""Trainer projections of an exported taskset version: the same tasks in the shapes trainers
read, one module each, registered in `REGISTERED` (a new projection is a module and a line).

Each projection is a folder inside the version (`vNNNN/<name>/`), written in a hidden folder
and renamed into place, so a reader never sees half of one and a re-run writes nothing:

- `trl`: TRL's prompt-only conversational rows plus the reward functions' columns;
- `verifiers`: the verifiers library's classic rows and a verifiers v1 taskset package;
- `prime-rl`: an `rl.toml` fragment training on that package with calibrated difficulty pools;
- `sft`: the solver's accepted rollouts as `messages` (+ `tools`) rows;
- `harbor`: a Harbor task directory per task a verifier container can grade without a model,
  the eval split's apart.

The parquet ones write one file per split (`train.parquet`, `eval.parquet`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from data.export.projections import harbor, prime_rl, sft, trl, verifiers
from data.export.projections.base import Inputs, Projector, canonical_rows, last_user_message
from data.export.projections.sft import SFT_SCHEMA, episode_message
from data.export.projections.trl import trl_row
from data.lake import Lake
from data.registry import registered_for_now

if TYPE_CHECKING:
    from data.export.verifiers_package import Graders

__all__ = [
    "REGISTERED",
    "formats",
    "registered",
    "SFT_SCHEMA",
    "Projection",
    "canonical_rows",
    "episode_message",
    "last_user_message",
    "project",
    "trl_row",
]

REGISTERED: list[Projector] = [
    trl.PROJECTION,
    verifiers.PROJECTION,
    prime_rl.PROJECTION,
    sft.PROJECTION,
    harbor.PROJECTION,
]


def formats() -> list[str]:
    """Every registered projection's name."""
    return [projector.name for projector in REGISTERED]


@contextmanager
def registered(projector: Projector) -> Iterator[Projector]:
    """`projector` registered for the duration (one that lives outside this package, e.g. in
    a test module)."""
    if projector.name in formats():
        raise ValueError(f"a projection is already called {projector.name!r}")
    with registered_for_now(REGISTERED, projector):
        yield projector


@dataclass(frozen=True)
class Projection:
    format: str
    path: Path
    rows: int
    written: bool  # False when the version already had it
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows left out


def project(version: Path, fmt: str, lake: Lake, *, graders: Graders) -> Projection:
    """Write projection `fmt` of the taskset version folder `version` (unless it is there);
    `graders`: how the verifiers package grades each verifier type (the registry's,
    `judges.verifier_types.package_graders()`)."""
    projector = next((p for p in REGISTERED if p.name == fmt), None)
    if projector is None:
        raise ValueError(f"unknown export format {fmt!r}; choose from {', '.join(formats())}")
    target = version / fmt
    if target.is_dir():
        summary = json.loads((target / "projection.json").read_text())
        return Projection(fmt, target, summary["rows"], False, summary["skipped"])
    tmp = version / f".{fmt}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    rows, skipped = projector.write(tmp, version, canonical_rows(version), Inputs(lake, graders))
    summary = {"format": fmt, "rows": rows, "skipped": skipped}
    (tmp / "projection.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, target)
    return Projection(fmt, target, rows, True, skipped)
