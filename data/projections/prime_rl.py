"""A prime-rl `rl.toml` fragment that trains on an exported taskset's verifiers v1 package.

It adds one `[[orchestrator.train.source]]` for the package (`data/verifiers_package.py`) with
the difficulty-pool sampler: pools at the ceilings calibration labels tasks with (`pool`
column), prime-rl's default weights, and the calibrated share of tasks in each pool as comments.
prime-rl re-scores pools from its own rollouts as training goes; tasks flagged hackable are
excluded by key, and so are the tasks of the eval split. It trains on every other task the
package holds, whatever its family (answer, document search, world tool use, tool replay,
code): the `null` harness serves the package's tool server to the model, and each task's turn
limit is the package's own `@vf.stop`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from data.projections.base import Inputs, Projector, Row
from data.records import POOL_CEILINGS
from data.splits import EVAL, HELD_OUT
from data.verifiers_package import Graders, packaged, taskset_id, tools_of

POOL_WEIGHTS = {"hard": 0.2, "normal": 1.0, "easy": 0.2}  # prime-rl's defaults
GROUP_SIZE = 8


def write_rl_toml(
    path: Path, version: Path, tasks: list[dict[str, Any]], graders: Graders
) -> tuple[int, dict]:
    """Write the fragment for the tasks of `version` the package grades (`graders`); returns
    (tasks it trains on, tasks left out per reason)."""
    manifest = json.loads((version / "manifest.json").read_text())
    skipped: dict[str, int] = {}
    trained, hackable, held_out = [], [], []
    for task in tasks:
        reason = packaged(task, version, graders)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
        elif task.get("split") == EVAL:
            held_out.append(task["task_id"])
        elif task["hackable"]:
            hackable.append(task["task_id"])
        else:
            trained.append(task)
    if hackable:
        skipped["hackable"] = len(hackable)
    if held_out:
        skipped[HELD_OUT] = len(held_out)
    text = rl_toml(manifest["name"], manifest["version"], trained, hackable, held_out)
    path.write_text(text)
    return len(trained), dict(sorted(skipped.items()))


PACKAGE_FOLDER = "./verifiers/taskset"  # the verifiers projection's package, in the version


def rl_toml(
    name: str,
    version: str,
    tasks: list[dict[str, Any]],
    hackable: list[str],
    held_out: Sequence[str] = (),
) -> str:
    """The fragment's text: one training source for the verifiers projection's v1 taskset
    package (`PACKAGE_FOLDER` in the version's folder) over `tasks`, without the keys of the
    `hackable` tasks and of those `held_out` (the eval split)."""
    ident = taskset_id(name)
    pools = Counter(t["pool"] for t in tasks)
    families = Counter(f"{t['kind']} ({tools_of(t)} tools)" for t in tasks)
    lines = [
        f"# prime-rl training source: taskfoundry taskset {name} {version}, {len(tasks)} tasks.",
        "# Families: " + (", ".join(f"{f}: {n}" for f, n in sorted(families.items())) or "none"),
        f"# Install the package first, from the version's folder: pip install {PACKAGE_FOLDER}",
        "# Then merge this fragment into a run: uv run rl @ rl.toml @ this-file.toml",
        "",
        "[[orchestrator.train.source]]",
        f'name = "{ident}"',
        f'env.taskset.id = "{ident}"',
        'env.agent.harness.id = "null"',
        'env.agent.runtime.type = "subprocess"',
        f"group_size = {GROUP_SIZE}",
        'sampler.type = "difficulty_pool"',
    ]
    for pool, ceiling in POOL_CEILINGS.items():
        lines.append(f"# {pool}: {pools.get(pool, 0)} tasks by calibration")
        lines.append(
            f"sampler.pools.{pool} = {{ threshold = {ceiling}, weight = {POOL_WEIGHTS[pool]} }}"
        )
    if hackable or held_out:
        lines.append(
            f"# not trained on: {len(hackable)} tasks flagged hackable by review,"
            f" {len(held_out)} of the eval split (held out to measure the policy)"
        )
        lines.append(f"select.exclude.keys = {json.dumps(sorted([*hackable, *held_out]))}")
    return "\n".join(lines) + "\n"


def _write(out: Path, version: Path, tasks: list[Row], inputs: Inputs) -> tuple[int, dict]:
    return write_rl_toml(out / "rl.toml", version, tasks, inputs.graders)


PROJECTION = Projector("prime-rl", "rl.toml source", _write)
