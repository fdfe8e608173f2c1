"""Run by tests/test_projections.py with the verifiers virtualenv's Python (verifiers needs
openai 2.x, the project has 3.x): loads an exported v1 taskset package through the verifiers
library as prime-rl does, and checks every task's gold answer scores 1, and a wrong one and the
gold padded with the question 0, with no model. Prints one JSON line with the figures.

Usage: python verifiers_check.py TASKSET_ID RL_TOML
"""

from __future__ import annotations

import asyncio
import json
import sys
import tomllib
from pathlib import Path

import verifiers.v1 as vf
from verifiers_world_check import trace_of  # beside this script


async def check(taskset_id: str, rl_toml: str) -> dict:
    source = tomllib.loads(Path(rl_toml).read_text())["orchestrator"]["train"]["source"][0]
    env = vf.load_environment(vf.resolve_env_config(source["env"]))
    tasks = list(env.taskset.select(vf.SelectConfig.model_validate(source.get("select", {}))))
    figures: dict = {"env": type(env).__name__, "tasks": len(tasks)}
    figures |= {"gold": [], "wrong": [], "padded": []}
    figures["unique_keys"] = len({t.key for t in tasks}) == len(tasks)
    figures["validated"] = [await t.validate(None) for t in tasks]
    for task in tasks:
        padded = f"{task.question} {task.data.answer}"  # the answer padded with the question
        replies = (("gold", task.data.answer), ("wrong", "zzz qqq unrelated"), ("padded", padded))
        for name, reply in replies:
            trace = trace_of(task, [{"reply": reply}])
            await task.score(trace)
            figures[name].append(trace.reward)
    figures["id"] = taskset_id == source["env"]["taskset"]["id"]
    # the fragment's eval source: the package's held-out split, its gold scoring 1 too
    held_out = tomllib.loads(Path(rl_toml).read_text())["orchestrator"]["eval"]["source"][0]
    eval_env = vf.load_environment(vf.resolve_env_config(held_out["env"]))
    figures["held_out"] = {t.key: None for t in eval_env.taskset}
    for task in eval_env.taskset:
        trace = trace_of(task, [{"reply": task.data.answer}])
        await task.score(trace)
        figures["held_out"][task.key] = trace.reward
    return figures


if __name__ == "__main__":
    print(json.dumps(asyncio.run(check(sys.argv[1], sys.argv[2]))))
