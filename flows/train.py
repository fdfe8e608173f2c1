"""The `train` flow: GRPO on an exported taskset with the taskset's own reward functions.

Its parameters are plain (paths, names, numbers), so it can be deployed to a separate work pool
(a GPU machine) while generation runs elsewhere: the taskset folder is all it reads, plus the
lake's repository mirrors when code tasks are to be scored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from data.config import FoundryConfig, load_config
from data.export import TRAIN, project, search_turns, split_file, taskset_version
from data.lake import Lake
from data.llm import EMBEDDED, Endpoint, LLMClient, policy_path, resolve_endpoints
from families import family_of
from families.stage import StageContext
from harnesses.train_episodes import EpisodeRecorder
from harnesses.trainer import (
    Rewarded,
    RewardFunction,
    TrainSettings,
    cpu_settings,
    gpu_settings,
    smoke_settings,
    train_grpo,
)
from judges import verifier_types
from judges.hacks import Audit
from judges.train_audit import audit_rewarded, summary, to_audit
from judges.unit_tests import unit_test_reward
from judges.verifier_types.trainer_rewards import judge_reward, verifier_reward

DEFAULT_STEPS = 200
AUDIT_SAMPLE = 8  # rewarded completions the judge panel audits for reward hacks per run


def settings_for(
    smoke: bool,
    steps: int | None,
    learning_rate: float | None = None,
    shuffle_rewards: bool = False,
    completion_tokens: int | None = None,
) -> TrainSettings:
    """One CPU step for a smoke run; else a GPU run where there is one, a small CPU run not;
    with `learning_rate` and `completion_tokens` (per completion, or per turn of an episode)
    instead of the default's, with `shuffle_rewards` as a control run."""
    if smoke:
        settings = smoke_settings()
    else:
        import torch

        chosen = gpu_settings if torch.cuda.is_available() else cpu_settings
        settings = chosen(steps or DEFAULT_STEPS)
    if learning_rate is not None:
        settings = replace(settings, learning_rate=learning_rate)
    if completion_tokens is not None:
        settings = replace(settings, max_completion_length=completion_tokens)
    return replace(settings, shuffle_rewards=shuffle_rewards)


def _audit_of(kind: str) -> Audit | None:
    try:
        return family_of(kind).audit
    except LookupError:
        return None


def hack_audit(
    config: FoundryConfig, endpoints: dict[str, Endpoint] | None
) -> Callable[[list[Rewarded]], dict[str, Any]]:
    """The audit of a run's rewarded completions: the judge panel of `endpoints`, or where
    they are not running, of the configured endpoints (the embedded model by default), started
    only when some completion needs a judge."""

    def audit(samples: list[Rewarded]) -> dict[str, Any]:
        items = to_audit(samples, _audit_of)
        if not items:
            return summary(len(samples), 0, [])

        async def run(panel: dict[str, Endpoint]) -> dict[str, Any]:
            llm = LLMClient(panel, cache=None, run_id="train")
            try:
                return await audit_rewarded(len(samples), items, llm)
            finally:
                await llm.aclose()

        if endpoints is not None:
            return asyncio.run(run(endpoints))
        with resolve_endpoints(config, config.home / "logs") as started:
            return asyncio.run(run(started))

    return audit


@task(name="grpo", cache_policy=NO_CACHE)
def grpo_task(
    policy: str,
    version: Path,
    rewards: dict[str, RewardFunction],
    scored_types: list[str],
    settings: TrainSettings,
    out: Path,
    save: bool,
    search_calls: int,
    recorder: EpisodeRecorder,
    audit: Callable[[list[Rewarded]], dict[str, Any]] | None = None,
    audit_sample: int = AUDIT_SAMPLE,
) -> dict[str, Any]:
    from datasets import load_dataset

    train_file = version / "trl" / split_file(TRAIN)  # the eval split is in another file
    dataset = load_dataset("parquet", data_files={TRAIN: str(train_file)})[TRAIN]
    result = train_grpo(
        policy,
        dataset,
        rewards,
        scored_types,
        settings,
        out,
        save,
        version=version,
        search_calls=search_calls,
        recorder=recorder,
        audit=audit,
        audit_sample=audit_sample,
    )
    return {
        "steps": result.steps,
        "rows": result.rows,
        "left_out": result.left_out,
        "environments": result.environments,
        "warm_start_rows": result.warm_start_rows,
        "episodes_recorded": result.episodes_recorded,
        "rewards": [entry.get("reward") for entry in result.log],
        "tool_calls": [entry.get("tools/call_frequency") for entry in result.log],
        "output_dir": str(result.output_dir),
        "saved": result.saved,
        "hack_audit": result.hack_audit,
    }


@flow(name="train")
def train_flow(
    taskset: str,
    model: str = EMBEDDED,
    smoke: bool = False,
    steps: int | None = None,
    out: str | None = None,
    judge: bool = False,
    audit: int = AUDIT_SAMPLE,
    home: str | None = None,
    config: str | None = None,
    learning_rate: float | None = None,
    shuffle_rewards: bool = False,
    completion_tokens: int | None = None,
    in_band_only: bool = False,
) -> dict[str, Any]:
    """GRPO-train `model` (`embedded`: SmolLM2-135M from its GGUF; else a folder or hub id) on
    the taskset at `taskset`, tasks with tools multi-turn in their environments. Rewards:
    exact/F1, tool calls and world state always; unit tests in the sandbox for code tasks whose
    repositories the lake mirrors; the judge panel for judged verifiers with `judge` (it starts
    the configured judge endpoints). `smoke`: one CPU step on one task per environment (a
    doc-search and a world task call their tools), after a short warm start. Every episode is
    recorded as proxy records in the lake (`foundry ingest traces HOME/lake/proxy_calls`).
    After training the judge panel audits up to `audit` fully rewarded completions for reward
    hacks (0: none); the summary's `hack_audit` says what it found. The taskset's `eval`
    split is never trained on. `shuffle_rewards` makes a control run: each step's rewards
    permuted across its completions (what a run learns from the reward's distribution alone).
    `in_band_only`: only the tasks the taskset's calibration put in its band (the rest teach
    nothing: every completion gets the same reward)."""
    cfg = load_config(Path(config) if config else None, Path(home) if home else None)
    version = taskset_version(Path(taskset))
    lake = Lake(cfg.home)
    project(version, "trl", lake, graders=verifier_types.package_graders())
    rewards: dict[str, RewardFunction] = {"verifier_reward": verifier_reward}
    scored = [t.name for t in verifier_types.REGISTERED if t.reward]
    unit_tests = StageContext(lake=lake, config=cfg, run_id="train").unit_tests
    if unit_tests.mirrors:
        rewards["unit_test_reward"] = unit_test_reward(unit_tests)
        scored += [t.name for t in verifier_types.REGISTERED if t.sandboxed]
    settings = settings_for(smoke, steps, learning_rate, shuffle_rewards, completion_tokens)
    settings = replace(settings, in_band_only=in_band_only)
    run = f"{version.parent.name}-{version.name}"
    output = Path(out) if out else cfg.home / "train" / run
    policy = policy_path(model, cfg.home / "cache" / "policy")
    save = not smoke
    # a doc-search episode may call as many tools as calibration's turns left before the answer
    search_calls = max(1, (search_turns(version) or cfg.calibrate.max_turns) - 1)
    recorder = EpisodeRecorder(lake, f"train-{run}", model)
    args = (policy, version, rewards, scored, settings, output, save, search_calls, recorder)
    if not judge:
        hacks = hack_audit(cfg, None) if audit else None
        return grpo_task(*args, hacks, audit)
    with resolve_endpoints(cfg, cfg.home / "logs") as endpoints:
        rewards["judge_reward"] = judge_reward(endpoints)
        scored += [t.name for t in verifier_types.REGISTERED if t.judged]
        hacks = hack_audit(cfg, endpoints) if audit else None
        return grpo_task(*args, hacks, audit)
