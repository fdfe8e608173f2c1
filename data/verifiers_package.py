"""A verifiers v1 taskset package for an exported taskset version.

The package (`pip install` it; its taskset id is `taskfoundry-<name>`) ships the tasks as
parquet, the taskset module in `data/taskset_package/` and a copy of `data/answer_match.py`,
so it imports neither taskfoundry nor its model client. It holds the tasks it can score without a
model or sandbox: verifier types `exact_or_f1` and `llm_equivalence` (the latter by its exact/F1
path alone, which only ever rejects more: the gold answer still scores 1). Other verifier types
are left out and counted.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from data import answer_match
from data.export import TASKSET_SCHEMA

TEMPLATE = Path(__file__).resolve().parent / "taskset_package"
SCORED_TYPES = ("exact_or_f1", "llm_equivalence")
VERIFIERS_REQUIREMENT = "verifiers>=0.4,<0.5"
# the canonical taskset's columns the package's tasks carry
PACKAGE_SCHEMA = pa.schema(
    TASKSET_SCHEMA.field(name)
    for name in ("task_id", "kind", "prompt", "answer", "verifier", "pass_rate", "band", "pool")
)


def taskset_id(name: str) -> str:
    """The verifiers taskset id of taskset `name` (its module name with `-` as `_`)."""
    return "taskfoundry-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "tasks")


def module_name(name: str) -> str:
    return taskset_id(name).replace("-", "_")


def packaged(task: dict[str, Any]) -> str | None:
    """None if the package can score `task`, else why it is left out."""
    kind = json.loads(task["verifier"]).get("type", "exact_or_f1")
    if kind not in SCORED_TYPES:
        return f"verifier_{kind}"
    if not answer_match.normalize_answer(task["answer"]):
        return "empty_answer"
    return None


def write_package(root: Path, version: Path, tasks: list[dict[str, Any]]) -> dict[str, int]:
    """Write the package for the tasks of `version` under `root`; returns the tasks left out
    per reason."""
    manifest = json.loads((version / "manifest.json").read_text())
    name, module = manifest["name"], module_name(manifest["name"])
    kept, skipped = [], {}
    for task in tasks:
        reason = packaged(task)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
        else:
            kept.append({field: task[field] for field in PACKAGE_SCHEMA.names})
    package = root / module
    package.mkdir(parents=True)
    for template in ("__init__.py", "taskset.py"):
        shutil.copyfile(TEMPLATE / template, package / template)
    shutil.copyfile(answer_match.__file__, package / "answer_match.py")
    pq.write_table(pa.Table.from_pylist(kept, schema=PACKAGE_SCHEMA), package / "tasks.parquet")
    (root / "pyproject.toml").write_text(_pyproject(name, manifest["version"], module))
    (root / "README.md").write_text(_readme(name, manifest["version"], len(kept), skipped))
    return dict(sorted(skipped.items()))


def _pyproject(name: str, version: str, module: str) -> str:
    number = int(re.sub(r"\D", "", version) or 0)
    return f"""[project]
name = "{taskset_id(name)}"
version = "{number}.0"
description = "taskfoundry taskset {name} {version} as a verifiers v1 taskset"
requires-python = ">=3.11"
dependencies = ["{VERIFIERS_REQUIREMENT}", "pyarrow>=14"]

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["{module}"]
"""


def _readme(name: str, version: str, n_tasks: int, skipped: dict[str, int]) -> str:
    left_out = ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items())) or "none"
    return f"""# {taskset_id(name)}

taskfoundry taskset `{name}` {version} as a verifiers v1 taskset: {n_tasks} tasks.
Left out (verifiers this package cannot run without a model or sandbox): {left_out}.

```bash
pip install .
vf-validate {taskset_id(name)} --runtime.type subprocess   # gold scores 1, empty reply 0
```

Each task's `key` is taskfoundry's task id; `data` carries the gold `answer`, the `verifier`
spec, and the calibration's `pass_rate`, `band` and prime-rl `pool`. The reward (`correct`)
is 1.0 for a normalised exact match or token F1 at or above the spec's threshold; a task whose
verifier carries rubric items takes exact matches only.
"""
