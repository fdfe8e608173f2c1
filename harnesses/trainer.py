"""GRPO training of a policy on a taskset's `trl` projection with TRL's GRPOTrainer.

The reward functions come from the caller (`judges.rewards` and friends, wired by
`flows/train.py`); rows whose verifier type none of them scores are left out first, so no
group trains on a reward that is missing. Tasks with tools train multi-turn: each row runs in
the environment its family was calibrated in (`harnesses.train_environments`, TRL's
`environment_factory`), the policy calls the tools and reads their results, and the reward
grades the whole episode. A policy whose chat template cannot render tool calls but speaks
ChatML (SmolLM2) gets Qwen2.5's tool-calling ChatML template, and a few supervised steps on
the tasks' gold episodes first (`harnesses.warm_start`). With a `recorder`, every episode is
written as recording-proxy records (`harnesses.train_episodes`). Each logged step goes to
`metrics.jsonl` in the output folder as it happens, and a summary to `summary.json`. With an
`audit`, the reward functions keep a uniform sample of the completions they fully rewarded
(`RewardSampler`), which the audit checks for reward hacks after training; its findings go
into the summary.
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

from data.export import EVAL, HELD_OUT, TRAIN
from data.rewarded import Rewarded
from harnesses.train_environments import Environments, environments_for, tools_of
from harnesses.train_episodes import EpisodeRecorder
from harnesses.warm_start import WarmStart, warm_start, warm_start_rows

RewardFunction = Callable[..., list[float | None]]
# the columns of a trainer row that grading a completion again needs
ROW_COLUMNS = ("verifier", "solution", "answer", "kind", "task_id", "workspace", "world")


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
    max_tool_turns: int  # tool-calling rounds per episode (TRL's max_tool_calling_iterations)
    warm_start: WarmStart | None  # supervised steps on gold episodes before GRPO (tool tasks)
    one_per_environment: bool = False  # train on one task per kind of environment (smoke)
    # a control run: each step's rewards permuted across its completions, so they keep their
    # distribution but say nothing of the completion they are given to
    shuffle_rewards: bool = False
    in_band_only: bool = False  # train only on tasks the taskset's calibration put in its band

    @property
    def prompts_per_step(self) -> int:
        return max(1, self.batch_size // self.num_generations)

    seed: int = 0


def smoke_settings() -> TrainSettings:
    """One step on CPU over one task per kind of environment (a doc-search task and a world
    task call their tools), after a short warm start: proves the wiring (environments, tool
    calls, rewards, loss, update, episode records), learns nothing."""
    return TrainSettings(
        max_steps=1,
        batch_size=4,
        num_generations=2,
        max_completion_length=256,  # a tool call, its result (search results run ~200 tokens)
        learning_rate=1e-6,
        bf16=False,
        use_vllm=False,
        max_tool_turns=1,
        warm_start=WarmStart(steps=10, learning_rate=3e-4, batch_size=2, calls_only=True),
        one_per_environment=True,
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
        max_tool_turns=6,
        warm_start=WarmStart(steps=50, learning_rate=1e-4, batch_size=8),
    )


def cpu_settings(max_steps: int) -> TrainSettings:
    """A real but small run on CPU: groups of 4, short completions."""
    return TrainSettings(
        max_steps=max_steps,
        batch_size=4,
        num_generations=4,
        max_completion_length=512,
        learning_rate=1e-6,
        bf16=False,
        use_vllm=False,
        max_tool_turns=4,
        warm_start=WarmStart(steps=20, learning_rate=1e-4, batch_size=4),
    )


@dataclass(frozen=True)
class TrainResult:
    steps: int
    rows: int  # taskset rows trained on
    left_out: dict[str, int]  # why rows were left out: a verifier type no reward scores, ...
    log: list[dict[str, float]]  # TRL's logged metrics per step
    output_dir: Path
    saved: bool
    environments: dict[str, int]  # rows per kind of environment (doc_search, world, ...)
    warm_start_rows: int  # assistant turns of gold episodes the warm start trained on
    episodes_recorded: int  # episodes written as recording-proxy records
    hack_audit: dict[str, Any] | None = None  # what the audit found among rewarded completions


IN_BAND = "in_band"
OUT_OF_BAND = "out_of_band"  # left-out reason: a task outside the band (`in_band_only`)


def trainable(
    dataset: Any, scored_types: Sequence[str], in_band_only: bool = False
) -> tuple[Any, dict[str, int]]:
    """The train split's rows whose verifier type a reward function scores (and, with
    `in_band_only`, whose band is `in_band`); the rest counted: the eval split's as
    `eval_split` (never trained on), then out-of-band rows as `out_of_band`, others by
    verifier type."""
    types = [json.loads(spec)["type"] for spec in dataset["verifier"]]
    splits = dataset["split"] if "split" in dataset.column_names else [TRAIN] * len(types)
    bands = dataset["band"] if in_band_only else [IN_BAND] * len(types)

    def left_out_as(kind: str, side: str, band: str) -> str | None:
        if side == EVAL:
            return HELD_OUT
        if band != IN_BAND:
            return OUT_OF_BAND
        return None if kind in scored_types else kind

    reasons = [left_out_as(*row) for row in zip(types, splits, bands, strict=True)]
    keep = [i for i, reason in enumerate(reasons) if reason is None]
    left_out = Counter(reason for reason in reasons if reason is not None)
    return dataset.select(keep), dict(sorted(left_out.items()))


def with_environments(
    rows: Any, version: Path, search_calls: int, one_per_environment: int
) -> tuple[Any, Environments]:
    """`rows` with an `environment` column naming each row's training environment (the
    projection's tool-replay `environment` column becomes `replay`), rows without a usable
    environment left out. With `one_per_environment` (a smoke run: the prompts of one step),
    the row with the shortest prompt of each kind of environment, then the next shortest rows
    until there are that many."""
    rows = rows.rename_column("environment", "replay")
    found = environments_for(rows, version, search_calls)
    kept = [(i, name) for i, name in enumerate(found.names) if name is not None]
    if one_per_environment:
        sizes = [sum(len(m["content"] or "") for m in prompt) for prompt in rows["prompt"]]
        by_size = sorted(kept, key=lambda row: sizes[row[0]])
        chosen: dict[str, tuple[int, str]] = {}
        for index, name in by_size:
            chosen.setdefault(family_of_environment(name), (index, name))
        picked = list(chosen.values())
        picked += [row for row in by_size if row not in picked][
            : max(0, one_per_environment - len(picked))
        ]
        kept = sorted(picked)
    names = [name for _, name in kept]
    return rows.select([i for i, _ in kept]).add_column("environment", names), found


def family_of_environment(name: str) -> str:
    """The kind of an environment name: `doc_search`, `world`, `replay` or `single_turn`."""
    return name.split(":", 1)[0]


def tool_tokenizer(policy: str) -> Any:
    """The policy's tokenizer, able to render tool calls: as it is where its chat template can,
    else (a ChatML template without tools, as SmolLM2's) Qwen2.5's tool-calling ChatML template,
    whose tokens it shares, with TRL's response parser for it."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template, supports_tool_calling

    tokenizer = AutoTokenizer.from_pretrained(policy)
    if supports_tool_calling(tokenizer):
        return tokenizer
    if "<|im_start|>" not in (tokenizer.chat_template or ""):
        raise ValueError(f"the chat template of {policy} can render no tool call")
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def train_grpo(
    policy: str,
    dataset: Any,
    rewards: dict[str, RewardFunction],
    scored_types: Sequence[str],
    settings: TrainSettings,
    output_dir: Path,
    save: bool,
    *,
    version: Path,
    search_calls: int = 3,
    recorder: EpisodeRecorder | None = None,
    audit: Callable[[list[Rewarded]], dict[str, Any]] | None = None,
    audit_sample: int = 8,
) -> TrainResult:
    """Train `policy` (a model folder or hub id, `data.llm.policy.policy_path`) with GRPO on the
    `trl` projection rows of `dataset` (a `datasets` Dataset) of taskset `version` that
    `rewards` can score, each in its environment (a doc-search episode makes at most
    `search_calls` calls); with `save`, the trained model goes to `output_dir/model`; with a
    `recorder`, every episode is recorded; with `audit`, up to `audit_sample` fully rewarded
    completions are audited for reward hacks after training."""
    from transformers import AutoTokenizer, PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    rows, left_out = trainable(dataset, scored_types, settings.in_band_only)
    one_each = settings.prompts_per_step if settings.one_per_environment else 0
    rows, environments = with_environments(rows, version, search_calls, one_each)
    left_out = dict(sorted((Counter(left_out) + Counter(environments.left_out)).items()))
    if len(rows) == 0:
        raise ValueError(f"no task of the taskset is left to train on; left out: {left_out}")
    output_dir.mkdir(parents=True, exist_ok=True)
    metrics = output_dir / "metrics.jsonl"
    metrics.unlink(missing_ok=True)
    with_tools = any(tools_of(environments.factories[n]) for n in set(rows["environment"]))
    tokenizer = tool_tokenizer(policy) if with_tools else AutoTokenizer.from_pretrained(policy)
    warmed = 0
    if with_tools and settings.warm_start is not None:
        gold = warm_start_rows(
            rows.to_list(),
            rows["environment"],
            environments.factories,
            _gold_reward(rewards),
            settings.warm_start.calls_only,
        )
        if gold:
            policy = warm_start(
                policy,
                tokenizer,
                gold,
                settings.warm_start,
                output_dir / "warm_start",
                bf16=settings.bf16,
                seed=settings.seed,
            )
            warmed = len(gold)

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
                    f" loss {logs['loss']:.4f}"
                    f" tool calls {logs.get('tools/call_frequency', 0.0):.2f}",
                    file=sys.stderr,
                )

    config = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=settings.max_steps,
        per_device_train_batch_size=settings.batch_size,
        num_generations=settings.num_generations,
        max_completion_length=settings.max_completion_length,
        max_tool_calling_iterations=settings.max_tool_turns,
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
    if recorder is not None:
        funcs[0] = recorder.wrap(funcs[0])
    if settings.shuffle_rewards:
        shuffler = random.Random(settings.seed)
        funcs = [shuffled(func, shuffler) for func in funcs]
    trainer = GRPOTrainer(
        model=policy,
        processing_class=tokenizer,
        reward_funcs=funcs,
        args=config,
        train_dataset=rows,
        callbacks=[StepLog()],
        environment_factory=environments.factories if with_tools else None,
    )
    trainer.remove_callback(PrinterCallback)  # StepLog reports instead, on stderr
    trainer.train()
    if save:
        trainer.save_model(str(output_dir / "model"))
    log = [entry for entry in trainer.state.log_history if "loss" in entry]
    found = audit(sampler.samples) if audit is not None else None
    result = TrainResult(
        steps=trainer.state.global_step,
        rows=len(rows),
        left_out=left_out,
        log=log,
        output_dir=output_dir,
        saved=save,
        environments=dict(Counter(map(family_of_environment, rows["environment"]))),
        warm_start_rows=warmed,
        episodes_recorded=recorder.episodes if recorder is not None else 0,
        hack_audit=found,
    )
    summary = {**asdict(result), "output_dir": str(output_dir), "settings": asdict(settings)}
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return result


def shuffled(func: RewardFunction, rng: random.Random) -> RewardFunction:
    """`func` with the rewards it gives a batch permuted among the completions it scored (those
    it returns None for stay None); what it records or audits still sees the true ones."""

    def permuted(prompts: list[Any], completions: list[Any], **columns: Any) -> list:
        rewards = list(func(prompts, completions, **columns))
        scored = [i for i, reward in enumerate(rewards) if reward is not None]
        values = [rewards[i] for i in scored]
        rng.shuffle(values)
        for index, value in zip(scored, values, strict=True):
            rewards[index] = value
        return rewards

    permuted.__name__ = getattr(func, "__name__", "reward")
    return permuted


def _gold_reward(rewards: dict[str, RewardFunction]) -> RewardFunction:
    """The reward a gold episode must earn: the sum TRL trains on, capped at 1."""

    def total(prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
        scores = [func(prompts, completions, **columns) for func in rewards.values()]
        return [min(1.0, sum(s for s in row if s is not None)) for row in zip(*scores, strict=True)]

    return total
