"""A verifiers v1 taskset package for an exported taskset version.

The package (`pip install` it; its taskset id is `taskfoundry-<name>`) ships the tasks as
parquet, the taskset module and world tool server in `data/taskset_package/`, and copies of
`data/answer_match.py`, `data/call_checks.py` and the world runtime `data/world_runtime.py` (the
very modules taskfoundry scores with), so it imports neither taskfoundry nor its model client.
It holds the tasks it can score without a model or sandbox: verifier types `exact_or_f1` and
`llm_equivalence` (the latter by its exact/F1 path alone, which only ever rejects more: the gold
answer still scores 1), and `world_state` (world tool-use tasks: the world's tools are the
task's tools, run on a fresh DuckDB world per rollout, and the reward is
`world_runtime.grade_calls`, as in `judges.world_state`). Other verifier types are left out and
counted.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from data import answer_match, call_checks, world_runtime
from data.export import TASKSET_SCHEMA

TEMPLATE = Path(__file__).resolve().parent / "taskset_package"
ANSWER_TYPES = ("exact_or_f1", "llm_equivalence")
TEMPLATES = ("__init__.py", "taskset.py", "world_tools.py")
SHIPPED = (
    answer_match,
    call_checks,
    world_runtime,
)  # taskfoundry's own modules, copied as they are
REQUIREMENTS = ("verifiers>=0.4,<0.5", "pyarrow>=14", "duckdb>=1.1", "jsonschema>=4.18")
# the canonical taskset's columns the package's tasks carry
PACKAGE_SCHEMA = pa.schema(
    TASKSET_SCHEMA.field(name)
    for name in (
        "task_id",
        "kind",
        "prompt",
        "answer",
        "verifier",
        "pass_rate",
        "band",
        "pool",
        "world",
    )
)


def taskset_id(name: str) -> str:
    """The verifiers taskset id of taskset `name` (its module name with `-` as `_`)."""
    return "taskfoundry-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "tasks")


def module_name(name: str) -> str:
    return taskset_id(name).replace("-", "_")


def packaged(task: dict[str, Any]) -> str | None:
    """None if the package can score `task`, else why it is left out."""
    kind = json.loads(task["verifier"]).get("type", "exact_or_f1")
    if kind == "world_state":
        return None if task["world"] else "world_state_without_world"
    if kind not in ANSWER_TYPES:
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
    for template in TEMPLATES:
        shutil.copyfile(TEMPLATE / template, package / template)
    for shipped in SHIPPED:
        shutil.copyfile(shipped.__file__, package / Path(shipped.__file__).name)
    pq.write_table(pa.Table.from_pylist(kept, schema=PACKAGE_SCHEMA), package / "tasks.parquet")
    (root / "pyproject.toml").write_text(_pyproject(name, manifest["version"], module))
    families = Counter(task["kind"] for task in kept)
    (root / "README.md").write_text(_readme(name, manifest["version"], families, skipped))
    return dict(sorted(skipped.items()))


def _pyproject(name: str, version: str, module: str) -> str:
    number = int(re.sub(r"\D", "", version) or 0)
    return f"""[project]
name = "{taskset_id(name)}"
version = "{number}.0"
description = "taskfoundry taskset {name} {version} as a verifiers v1 taskset"
requires-python = ">=3.11"
dependencies = {json.dumps(list(REQUIREMENTS))}

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["{module}"]
"""


def _readme(name: str, version: str, families: Counter[str], skipped: dict[str, int]) -> str:
    kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(families.items())) or "none"
    left_out = ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items())) or "none"
    return f"""# {taskset_id(name)}

taskfoundry taskset `{name}` {version} as a verifiers v1 taskset: {families.total()} tasks
({kinds}).
Left out (verifiers this package cannot run without a model or sandbox): {left_out}.

```bash
pip install .
vf-validate {taskset_id(name)} --runtime.type subprocess   # gold scores 1, untouched 0
```

Each task's `key` is taskfoundry's task id; `data` carries the gold `answer`, the `verifier`
spec, the calibration's `pass_rate`, `band` and prime-rl `pool`, and for a world task its
`world` (spec, initial state, turn limit). The reward (`correct`) is 1.0 for a normalised exact
match or token F1 at or above the spec's threshold; a task whose verifier carries rubric items
takes exact matches only. A world task (`world_tool_use`) is a multi-turn tool task: the world
tool server (`world_tools`) offers the world's tools and runs each call on the rollout's own
DuckDB world; the reward replays the conversation's calls on a fresh world from the initial
state and is 1.0 when that leaves exactly the gold final state (and, where the task asks a
question, the last reply matches the gold answer exactly). `world_runtime.py`,
`call_checks.py` and `answer_match.py` are taskfoundry's own modules, copied as they are.
"""
