"""What every exported Harbor task shares: its name and folder (eval tasks in their own tree),
its `task.toml` (the taskset's columns as metadata, the split among them; the verifier in a
container of its own, without network; the agent as a user of its own), its instruction, and
the verifier's files (taskfoundry's grading package and runtime, and the task's `task.json`)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

import tomli_w

from data.export.splits import EVAL, TRAIN, Row
from data.export.verifiers_package import RUNTIME, taskset_id

HERE = Path(__file__).resolve().parent
VERIFIER = HERE.parent / "harbor_verifier"  # shipped as tests/foundry_verifier/
VERIFIER_PACKAGE = "foundry_verifier"
SCHEMA_VERSION = "1.4"  # the task.toml schema Harbor 0.25 and 0.26 write
AGENT_USER = "agent"  # the environments' Dockerfiles make this user
APP = "/app"  # where the agent works, restored in the verifier's container
# the taskset's columns a task.toml carries as metadata
METADATA_COLUMNS = (
    "task_id",
    "kind",
    "split",
    "band",
    "pass_rate",
    "pass_ci_low",
    "pass_ci_high",
    "pass_n",
    "pool",
    "harness",
    "solver_model",
    "hackable",
    "repo",
    "base_revision",
)
_NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.pyc")


def task_folder(root: Path, task: Row) -> Path:
    """The task's folder: `<root>/eval/<name>` for an eval task, else `<root>/train/<name>`."""
    side = EVAL if task.get("split") == EVAL else TRAIN
    return root / side / short_name(task)


def short_name(task: Row) -> str:
    """The task's name within its taskset: its kind and id (`bug-fix-0123abcd`)."""
    return f"{task['kind'].replace('_', '-')}-{task['task_id']}"


@dataclass(frozen=True)
class Timeouts:
    """Seconds a task's verifier, agent and image builds may take."""

    verifier: float
    agent: float
    build: float


def task_toml(
    task: Row,
    manifest: dict[str, Any],
    timeouts: Timeouts,
    artifacts: list[Any],
    steps: list[dict[str, Any]] | None = None,
) -> str:
    """The task's `task.toml`: Harbor's name (`org/name`: the verifiers taskset id of the
    taskset, the task's short name), the taskset's columns as metadata, the verifier run
    separately without network, the agent as a user of its own in `/app`, each within its
    `timeouts`, and its `steps` (several: the task's reward is their mean)."""
    verifier = {
        "timeout_sec": timeouts.verifier,
        "environment": {"build_timeout_sec": timeouts.build},
    }
    agent = {"timeout_sec": timeouts.agent}
    environment = {"build_timeout_sec": timeouts.build, "workdir": APP}
    metadata = {column: task.get(column) for column in METADATA_COLUMNS}
    metadata |= {
        "taskset": manifest["name"],
        "taskset_version": manifest["version"],
        "verifier": json.loads(task["verifier"]).get("type", "exact_or_f1"),
    }
    document = {
        "schema_version": SCHEMA_VERSION,
        "multi_step_reward_strategy": "mean" if steps else None,
        "task": {
            "name": f"{taskset_id(manifest['name'])}/{short_name(task)}",
            "version": manifest["version"],
            "description": f"taskfoundry {task['kind']} task {task['task_id']}",
            "keywords": ["taskfoundry", task["kind"], task.get("split") or TRAIN],
        },
        "metadata": metadata,
        "verifier": {
            "environment_mode": "separate",
            **verifier,
            "environment": {"network_mode": "no-network", **verifier.get("environment", {})},
        },
        "agent": {"user": AGENT_USER, **agent},
        "environment": environment,
        "artifacts": artifacts,
        "steps": steps,
    }
    return tomli_w.dumps(without_nulls(document))


def without_nulls(value: Any) -> Any:
    """`value` with every None left out of its tables and arrays (TOML has no null)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value if v is not None]
    return value


def user_text(prompt: list[dict[str, Any]]) -> str:
    """The prompt's last user message."""
    return next((m["content"] for m in reversed(prompt) if m["role"] == "user"), "")


def template(name: str) -> str:
    """One of this package's template files, as it is."""
    return (HERE / name).read_text(encoding="utf-8")


def render(template_name: str, **values: str) -> str:
    """One of this package's template files with its `$name`s filled."""
    return Template(template(template_name)).substitute(values)


def write(path: Path, text: str, executable: bool = False) -> None:
    """`text` written to `path` (folders made); `executable` sets the mode a script needs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if executable:
        os.chmod(path, 0o755)


def write_verifier(tests: Path, task_data: dict[str, Any]) -> None:
    """The verifier's own files in `tests/`: taskfoundry's grading package with its runtime
    inside, and `task.json`, what only the verifier may see (the gold, the hidden tests)."""
    package = tests / VERIFIER_PACKAGE
    shutil.copytree(VERIFIER, package, ignore=_NOT_SOURCE)
    shutil.copytree(RUNTIME, package / RUNTIME.name, ignore=_NOT_SOURCE)
    write(tests / "task.json", json.dumps(task_data, indent=2, sort_keys=True) + "\n")
