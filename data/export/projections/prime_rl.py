"""A prime-rl `rl.toml` fragment that trains on an exported taskset's verifiers v1 package.

It adds one `[[orchestrator.train.source]]` for the package (`data/export/verifiers_package.py`)
with the difficulty-pool sampler: pools at the ceilings calibration labels tasks with (`pool`
column), prime-rl's default weights, and the calibrated share of tasks in each pool as comments.
prime-rl re-scores pools from its own rollouts as training goes; tasks flagged hackable are
excluded by key. The eval split is the package's `split = "eval"`, declared as the run's eval
source. It trains on every other task the package holds, whatever its family (answer,
document search, world tool use, tool replay, code): the `null` harness serves the package's
tool server to the model, and each task's turn limit is the package's own `@vf.stop`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from data.export.projections.base import Inputs, Projector, Row
from data.export.splits import EVAL, HELD_OUT, TRAIN
from data.export.verifiers_package import Graders, packaged, taskset_id, tools_of
from data.lake import POOL_CEILINGS

POOL_WEIGHTS = {"hard": 0.2, "normal": 1.0, "easy": 0.2}  # prime-rl's defaults
GROUP_SIZE = 8


def write_rl_toml(
    path: Path, version: Path, tasks: list[dict[str, Any]], graders: Graders
) -> tuple[int, dict]:
    """Write the fragment for the tasks of `version` the package grades (`graders`); returns
    (tasks it trains on, tasks left out of training per reason)."""
    manifest = json.loads((version / "manifest.json").read_text())
    skipped: dict[str, int] = {}
    chosen: dict[str, list[dict[str, Any]]] = {TRAIN: [], EVAL: []}
    hackable: dict[str, list[str]] = {TRAIN: [], EVAL: []}
    for task in tasks:
        reason = packaged(task, version, graders)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
        elif task["hackable"]:
            hackable[task["split"]].append(task["task_id"])
        else:
            chosen[task["split"]].append(task)
    if hackable[TRAIN] or hackable[EVAL]:
        skipped["hackable"] = len(hackable[TRAIN]) + len(hackable[EVAL])
    if chosen[EVAL]:
        skipped[HELD_OUT] = len(chosen[EVAL])
    text = rl_toml(manifest["name"], manifest["version"], chosen, hackable)
    path.write_text(text)
    return len(chosen[TRAIN]), dict(sorted(skipped.items()))


PACKAGE_FOLDER = "./verifiers/taskset"  # the verifiers projection's package, in the version


def rl_toml(
    name: str,
    version: str,
    chosen: dict[str, list[dict[str, Any]]],
    hackable: dict[str, list[str]],
) -> str:
    """The fragment's text: a training source on the train split of the verifiers projection's
    v1 taskset package (`PACKAGE_FOLDER` in the version's folder) and, where the eval split
    has tasks, an eval source on it, each over its `chosen` tasks: without the keys of its
    `hackable` ones."""
    ident = taskset_id(name)
    trained = chosen[TRAIN]
    pools = Counter(t["pool"] for t in trained)
    families = Counter(f"{t['kind']} ({tools_of(t)} tools)" for t in trained)
    lines = [
        f"# prime-rl training source: taskfoundry taskset {name} {version}, {len(trained)} tasks.",
        "# Families: " + (", ".join(f"{f}: {n}" for f, n in sorted(families.items())) or "none"),
        f"# Install the package first, from the version's folder: pip install {PACKAGE_FOLDER}",
        "# Then merge this fragment into a run: uv run rl @ rl.toml @ this-file.toml",
        "",
        "[[orchestrator.train.source]]",
        *_source_lines(ident, TRAIN),
        f"group_size = {GROUP_SIZE}",
        'sampler.type = "difficulty_pool"',
    ]
    for pool, ceiling in POOL_CEILINGS.items():
        lines.append(f"# {pool}: {pools.get(pool, 0)} tasks by calibration")
        lines.append(
            f"sampler.pools.{pool} = {{ threshold = {ceiling}, weight = {POOL_WEIGHTS[pool]} }}"
        )
    lines += _excluded(hackable[TRAIN])
    if chosen[EVAL]:
        lines += [
            "",
            f"# held out: the eval split, {len(chosen[EVAL])} tasks related to no training task",
            "[orchestrator.eval]",
            "[[orchestrator.eval.source]]",
            *_source_lines(ident, EVAL),
            f"num_examples = {len(chosen[EVAL])}",
            *_excluded(hackable[EVAL]),
        ]
    return "\n".join(lines) + "\n"


def _source_lines(ident: str, split: str) -> list[str]:
    """A source's keys: the package's taskset on `split`, served to the model as it is."""
    return [
        f'name = "{ident}-{split}"',
        f'env.taskset.id = "{ident}"',
        f'env.taskset.split = "{split}"',
        'env.agent.harness.id = "null"',
        'env.agent.runtime.type = "subprocess"',
    ]


def _excluded(hackable: list[str]) -> list[str]:
    """The lines leaving a split's tasks flagged hackable out of its source."""
    if not hackable:
        return []
    return [
        f"# not used: {len(hackable)} tasks flagged hackable by review",
        f"select.exclude.keys = {json.dumps(sorted(hackable))}",
    ]


def _write(out: Path, version: Path, tasks: list[Row], inputs: Inputs) -> tuple[int, dict]:
    return write_rl_toml(out / "rl.toml", version, tasks, inputs.graders)


PROJECTION = Projector("prime-rl", "rl.toml source", _write)
