"""GRPO training of a policy on a taskset's `trl` projection with TRL's GRPOTrainer.

The reward functions come from the caller (`judges.rewards` and friends, wired by
`flows/train.py`); rows whose verifier type none of them scores are left out first, so no
group trains on a reward that is missing. Each logged step goes to `metrics.jsonl` in the
output folder as it happens, and a summary to `summary.json`. With an `audit`, the reward
functions keep a uniform sample of the completions they fully rewarded (`RewardSampler`), which
the audit checks for reward hacks after training; its findings go into the summary.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RewardFunction = Callable[..., list[float | None]]
# the columns of a trainer row that grading a completion again needs
ROW_COLUMNS = ("verifier", "solution", "answer", "kind", "task_id", "workspace", "world")


@dataclass(frozen=True)
class Rewarded:
    """A completion a reward function rewarded fully (reward >= 1), with its row's columns."""

    reward_function: str
    prompt: Any
    completion: Any  # text, or a conversation (a list of messages)
    columns: dict[str, Any]


class RewardSampler:
    """Wraps reward functions to keep a uniform sample (reservoir) of up to `limit` fully
    rewarded completions over a run, each (task, completion) once."""

    def __init__(self, limit: int, seed: int = 0) -> None:
        self.limit = limit
        self.samples: list[Rewarded] = []
        self.offered = 0  # distinct rewarded completions seen
        self._seen: set[str] = set()
        self._random = random.Random(seed)

    def wrap(self, name: str, func: RewardFunction) -> RewardFunction:
        """`func`, recording what it rewards fully."""

        def sampled(prompts: list[Any], completions: list[Any], **columns: Any) -> list:
            rewards = func(prompts, completions, **columns)
            for index, reward in enumerate(rewards):
                if reward is not None and reward >= 1.0:
                    row = {
                        key: columns[key][index]
                        for key in ROW_COLUMNS
                        if isinstance(columns.get(key), list)
                        and len(columns[key]) == len(completions)
                    }
                    self.offer(Rewarded(name, prompts[index], completions[index], row))
            return rewards

        sampled.__name__ = name
        return sampled

    def offer(self, rewarded: Rewarded) -> None:
        """Keep `rewarded` with the probability that keeps the sample uniform."""
        key = json.dumps([rewarded.columns.get("task_id"), rewarded.completion], default=str)
        if key in self._seen:
            return
        self._seen.add(key)
        self.offered += 1
        if len(self.samples) < self.limit:
            self.samples.append(rewarded)
            return
        slot = self._random.randrange(self.offered)
        if slot < self.limit:
            self.samples[slot] = rewarded


@dataclass(frozen=True)
class TrainSettings:
    max_steps: int
    batch_size: int  # completions per device and step
    num_generations: int  # completions per prompt (the GRPO group)
    max_completion_length: int
    learning_rate: float
    bf16: bool
    use_vllm: bool  # generate with vLLM, colocated on the training GPU
    seed: int = 0


def smoke_settings() -> TrainSettings:
    """Two short steps on CPU: proves the wiring (data, rewards, loss, update), learns nothing."""
    return TrainSettings(
        max_steps=2,
        batch_size=2,
        num_generations=2,
        max_completion_length=16,
        learning_rate=1e-6,
        bf16=False,
        use_vllm=False,
    )


def gpu_settings(max_steps: int) -> TrainSettings:
    """A real run on one GPU: bf16, groups of 8, vLLM generation when vLLM is installed."""
    return TrainSettings(
        max_steps=max_steps,
        batch_size=8,
        num_generations=8,
        max_completion_length=256,
        learning_rate=1e-6,
        bf16=True,
        use_vllm=importlib.util.find_spec("vllm") is not None,
    )


def cpu_settings(max_steps: int) -> TrainSettings:
    """A real but small run on CPU: groups of 4, short completions."""
    return TrainSettings(
        max_steps=max_steps,
        batch_size=4,
        num_generations=4,
        max_completion_length=64,
        learning_rate=1e-6,
        bf16=False,
        use_vllm=False,
    )


@dataclass(frozen=True)
class TrainResult:
    steps: int
    rows: int  # taskset rows trained on
    left_out: dict[str, int]  # verifier type -> rows no reward function scores
    log: list[dict[str, float]]  # TRL's logged metrics per step
    output_dir: Path
    saved: bool
    hack_audit: dict[str, Any] | None = None  # what the audit found among rewarded completions


def trainable(dataset: Any, scored_types: Sequence[str]) -> tuple[Any, dict[str, int]]:
    """The rows whose verifier type a reward function scores, and the rest counted by type."""
    types = [json.loads(spec)["type"] for spec in dataset["verifier"]]
    left_out = Counter(t for t in types if t not in scored_types)
    keep = [i for i, t in enumerate(types) if t in scored_types]
    return dataset.select(keep), dict(sorted(left_out.items()))


def train_grpo(
    policy: str,
    dataset: Any,
    rewards: dict[str, RewardFunction],
    scored_types: Sequence[str],
    settings: TrainSettings,
    output_dir: Path,
    save: bool,
    audit: Callable[[list[Rewarded]], dict[str, Any]] | None = None,
    audit_sample: int = 8,
) -> TrainResult:
    """Train `policy` (a model folder or hub id, `data.policy.policy_path`) with GRPO on the
    `trl` projection rows of `dataset` (a `datasets` Dataset) that `rewards` can score; with
    `save`, the trained model goes to `output_dir/model`; with `audit`, up to `audit_sample`
    fully rewarded completions are audited for reward hacks after training."""
    from transformers import AutoTokenizer, PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    rows, left_out = trainable(dataset, scored_types)
    if len(rows) == 0:
        raise ValueError(f"no task in the taskset has a verifier the rewards score: {left_out}")
    output_dir.mkdir(parents=True, exist_ok=True)
    metrics = output_dir / "metrics.jsonl"
    metrics.unlink(missing_ok=True)

    class StepLog(TrainerCallback):
        """Each logged step to metrics.jsonl, and a line of it to stderr."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs:
                return
            with metrics.open("a") as out:
                out.write(json.dumps({"step": state.global_step, **logs}) + "\n")
            if "loss" in logs:
                print(
                    f"train: step {state.global_step}/{state.max_steps}"
                    f" reward {logs.get('reward', float('nan')):.3f}"
                    f" loss {logs['loss']:.4f}",
                    file=sys.stderr,
                )

    config = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=settings.max_steps,
        per_device_train_batch_size=settings.batch_size,
        num_generations=settings.num_generations,
        max_completion_length=settings.max_completion_length,
        learning_rate=settings.learning_rate,
        bf16=settings.bf16,
        use_cpu=not settings.bf16,
        use_vllm=settings.use_vllm,
        vllm_mode="colocate",
        gradient_checkpointing=False,  # TRL turns it on by default; a 135M policy needs no saving
        beta=0.0,  # no reference model: GRPO as in DAPO / Dr. GRPO
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=settings.seed,
        model_init_kwargs={"dtype": "bfloat16" if settings.bf16 else "float32"},
    )
    sampler = RewardSampler(audit_sample if audit is not None else 0, settings.seed)
    # TRL names each reward's metrics after its function: the wrapper carries the name
    funcs = [sampler.wrap(name, func) for name, func in rewards.items()]
    trainer = GRPOTrainer(
        model=policy,
        processing_class=AutoTokenizer.from_pretrained(policy),
        reward_funcs=funcs,
        args=config,
        train_dataset=rows,
        callbacks=[StepLog()],
    )
    trainer.remove_callback(PrinterCallback)  # StepLog reports instead, on stderr
    trainer.train()
    if save:
        trainer.save_model(str(output_dir / "model"))
    log = [entry for entry in trainer.state.log_history if "loss" in entry]
    found = audit(sampler.samples) if audit is not None else None
    result = TrainResult(
        trainer.state.global_step, len(rows), left_out, log, output_dir, save, found
    )
    summary = {**asdict(result), "output_dir": str(output_dir), "settings": asdict(settings)}
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return result
