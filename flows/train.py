"""The `train` flow: GRPO on an exported taskset with the taskset's own reward functions.

Its parameters are plain (paths, names, numbers), so it can be deployed to a separate work pool
(a GPU machine) while generation runs elsewhere: the taskset folder is all it reads, plus the
lake's repository mirrors when code tasks are to be scored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from data.config import load_config
from data.export import taskset_version
from data.lake import Lake
from data.model_servers import resolve_endpoints
from data.policy import EMBEDDED, policy_path
from data.projections import project
from families.stage import StageContext
from harnesses.trainer import (
    RewardFunction,
    TrainSettings,
    cpu_settings,
    gpu_settings,
    smoke_settings,
    train_grpo,
)
from judges.equivalence import judge_reward
from judges.rewards import verifier_reward
from judges.unit_tests import unit_test_reward

DEFAULT_STEPS = 200


def settings_for(smoke: bool, steps: int | None) -> TrainSettings:
    """Two CPU steps for a smoke run; else a GPU run where there is one, a small CPU run not."""
    if smoke:
        return smoke_settings()
    import torch

    chosen = gpu_settings if torch.cuda.is_available() else cpu_settings
    return chosen(steps or DEFAULT_STEPS)


@task(name="grpo", cache_policy=NO_CACHE)
def grpo_task(
    policy: str,
    version: Path,
    rewards: dict[str, RewardFunction],
    scored_types: list[str],
    settings: TrainSettings,
    out: Path,
    save: bool,
) -> dict[str, Any]:
    from datasets import load_dataset

    dataset = load_dataset("parquet", data_files=str(version / "trl" / "*.parquet"))["train"]
    result = train_grpo(policy, dataset, rewards, scored_types, settings, out, save)
    return {
        "steps": result.steps,
        "rows": result.rows,
        "left_out": result.left_out,
        "rewards": [entry.get("reward") for entry in result.log],
        "output_dir": str(result.output_dir),
        "saved": result.saved,
    }


@flow(name="train")
def train_flow(
    taskset: str,
    model: str = EMBEDDED,
    smoke: bool = False,
    steps: int | None = None,
    out: str | None = None,
    judge: bool = False,
    home: str | None = None,
    config: str | None = None,
) -> dict[str, Any]:
    """GRPO-train `model` (`embedded`: SmolLM2-135M from its GGUF; else a folder or hub id) on
    the taskset at `taskset`. Rewards: exact/F1 and tool calls always; unit tests in the
    sandbox for code tasks whose repositories the lake mirrors; the judge panel for judged
    verifiers with `judge` (it starts the configured judge endpoints). `smoke`: two CPU steps."""
    cfg = load_config(Path(config) if config else None, Path(home) if home else None)
    version = taskset_version(Path(taskset))
    lake = Lake(cfg.home)
    project(version, "trl", lake)
    rewards: dict[str, RewardFunction] = {"verifier_reward": verifier_reward}
    scored = ["exact_or_f1", "tool_calls"]
    unit_tests = StageContext(lake=lake, config=cfg, run_id="train").unit_tests
    if unit_tests.mirrors:
        rewards["unit_test_reward"] = unit_test_reward(unit_tests)
        scored.append("unit_tests")
    settings = settings_for(smoke, steps)
    output = Path(out) if out else cfg.home / "train" / f"{version.parent.name}-{version.name}"
    policy = policy_path(model, cfg.home / "cache" / "policy")
    if not judge:
        return grpo_task(policy, version, rewards, scored, settings, output, not smoke)
    with resolve_endpoints(cfg, cfg.home / "logs") as endpoints:
        rewards["judge_reward"] = judge_reward(endpoints)
        scored += ["llm_equivalence", "rubric"]
        return grpo_task(policy, version, rewards, scored, settings, output, not smoke)
