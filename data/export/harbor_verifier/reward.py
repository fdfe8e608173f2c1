"""The verifier's outcome where Harbor reads it: `reward.json` in the verifier's log folder
(Harbor prefers it to `reward.txt`), written last and renamed into place, so that whatever the
graded code left there is replaced; the reason beside it in `grade.json`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_outcome(logs: Path, reward: float, why: str, **more: Any) -> None:
    """Write `reward` (and why, and `more` for the log) to the folder `logs`."""
    logs.mkdir(parents=True, exist_ok=True)
    details = {"reward": reward, "why": why, **more}
    _replace(logs / "grade.json", json.dumps(details, indent=2, sort_keys=True) + "\n")
    _replace(logs / "reward.json", json.dumps({"reward": reward}) + "\n")
    print(json.dumps(details, sort_keys=True))


def _replace(path: Path, text: str) -> None:
    staged = path.with_name(f".{path.name}.tmp")
    staged.unlink(missing_ok=True)
    staged.write_text(text)
    os.replace(staged, path)
