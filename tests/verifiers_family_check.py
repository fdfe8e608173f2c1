"""Run by tests/test_package_families.py with the verifiers virtualenv's Python: loads an exported
v1 taskset package through the verifiers library and, for each task in the cases (of either
split), grades the
given completions (turns of tool calls and replies) with the package's reward, runs the given
tool calls through the package's tool server, and asks its turn limit whether a trace one turn
short of the limit, and one at it, may go on. Also counts the tasks the prime-rl fragment's
source selects. Prints one JSON line.

Usage: python verifiers_family_check.py TASKSET_ID CASES_JSON RL_TOML
"""

from __future__ import annotations

import asyncio
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from verifiers_world_check import tool_results, trace_of  # beside this script


async def check(taskset_id: str, cases_json: str, rl_toml: str) -> dict[str, Any]:
    cases = json.loads(Path(cases_json).read_text())
    figures: dict[str, Any] = {"rewards": {}, "tools": {}, "validated": {}, "stops": {}}
    figures["tasks"] = {}
    for task in packaged_tasks(taskset_id):
        figures["tasks"][task.key] = [task.data.kind, task.data.harness, task.data.max_turns]
        if task.key not in cases:
            continue
        case = cases[task.key]
        figures["validated"][task.key] = await task.validate(None)
        rewards = figures["rewards"][task.key] = {}
        for name, turns in case["completions"].items():
            trace = trace_of(task, turns)
            await task.score(trace)
            rewards[name] = trace.reward
        figures["tools"][task.key] = await tool_results(task, case["calls"])
        limit = task.data.max_turns
        figures["stops"][task.key] = [
            await task.turn_limit(trace_of(task, [{"reply": "..."}] * turns))
            for turns in (limit - 1, limit)
        ]
    source = tomllib.loads(Path(rl_toml).read_text())["orchestrator"]["train"]["source"][0]
    trained = vf.load_environment(vf.resolve_env_config(source["env"]))
    selected = trained.taskset.select(vf.SelectConfig.model_validate(source.get("select", {})))
    figures["trained"] = sorted(task.key for task in selected)
    return figures


def packaged_tasks(taskset_id: str) -> list[Any]:
    """Every task the package ships: its train split, then its eval split where it has one."""
    tasks = []
    for split in ("train", "eval"):
        config = vf.resolve_env_config({"taskset": {"id": taskset_id, "split": split}})
        try:
            tasks += list(vf.load_environment(config).taskset)
        except FileNotFoundError:  # a split without tasks has no file
            assert split == "eval"
    return tasks


if __name__ == "__main__":
    print(json.dumps(asyncio.run(check(sys.argv[1], sys.argv[2], sys.argv[3]))))
