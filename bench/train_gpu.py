"""GPU trainer stage: GRPO steps per second of `harnesses.trainer.train_grpo` on one GPU.

It trains the policy (default: the embedded SmolLM2-135M-Instruct, dequantised from its GGUF by
`data.llm.policy.policy_path`; or any model folder with `--policy`) on a taskset's `trl` projection
with `judges.verifier_types.trainer_rewards.verifier_reward` as the reward (verifier types
`exact_or_f1` and `tool_calls`), as `flows/train.py` wires it but without Prefect, under
`harnesses.trainer.gpu_settings(steps)`: bf16, 8 completions per step in groups of 8, up to 256
tokens each, generation by transformers unless vLLM is installed.

It prints:

- the time to resolve the policy (the GGUF's dequantisation the first time) and to load the data;
- steps, wall seconds of the training, seconds per step (overall, and from step 2 on: step 1
  carries CUDA's start and the model's load), completions per second (steps x batch size / time)
  and generated tokens per second (TRL's `num_tokens` counts prompt and completion tokens; the
  completion lengths it logs are used here);
- the peak GPU memory (`torch.cuda.max_memory_allocated`);
- the reward of the first and last logged steps;
- where `metrics.jsonl`, `summary.json` and this benchmark's `bench.json` went.

Per-step times come from the moments each step's line reaches `metrics.jsonl` (polled).
`--cpu-smoke` runs `smoke_settings()` instead (one GRPO step after a short warm start) to
check the wiring on a machine without a GPU. Run from the repository root (needs the `train` extra):

`.venv/bin/python bench/train_gpu.py --data TASKSET_VERSION_OR_TRL_FOLDER [--steps 40] [--out DIR]`
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.export import TRAIN, split_file  # noqa: E402
from data.llm import EMBEDDED, policy_path  # noqa: E402
from harnesses.trainer import (  # noqa: E402
    RewardFunction,
    TrainSettings,
    gpu_settings,
    smoke_settings,
    train_grpo,
)
from judges.verifier_types.trainer_rewards import verifier_reward  # noqa: E402

SCORED_TYPES = ["exact_or_f1", "tool_calls"]
SHOWN_STEPS = 3  # rewards printed from each end of the run


def trl_files(data: Path) -> str:
    """The train split of a taskset version's `trl` projection (or of a folder holding it)."""
    folder = data / "trl" if (data / "trl").is_dir() else data
    train = folder / split_file(TRAIN)
    if not train.is_file():
        raise FileNotFoundError(f"no trl train split ({train.name}) in {folder}")
    return str(train)


class StepClock:
    """Times each logged step by polling `metrics.jsonl` for new lines that carry a loss."""

    def __init__(self, metrics: Path, interval_s: float = 0.02) -> None:
        self.metrics = metrics
        self.interval_s = interval_s
        self.stamps: list[float] = []  # perf_counter when each logged step appeared
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> StepClock:
        self.start = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._read()  # the last step's line, if written after the last poll

    def _read(self) -> None:
        try:
            lines = self.metrics.read_text().splitlines()
        except FileNotFoundError:
            return
        steps = sum(1 for line in lines if line.endswith("}") and '"loss"' in line)
        now = time.perf_counter()
        self.stamps += [now] * (steps - len(self.stamps))

    def _poll(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._read()

    def durations(self) -> list[float]:
        """Seconds of each logged step (the first counted from the clock's start)."""
        marks = [self.start, *self.stamps]
        return [b - a for a, b in zip(marks, marks[1:], strict=False)]


def rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("nan")


def figures(
    settings: TrainSettings, log: list[dict[str, Any]], train_s: float, step_s: list[float]
) -> dict[str, Any]:
    """The benchmark's figures from TRL's log and the step clock."""
    steps = len(log)
    completions = steps * settings.batch_size
    lengths = [entry.get("completions/mean_length", float("nan")) for entry in log]
    tokens = sum(length * settings.batch_size for length in lengths)
    later = step_s[1:]
    out: dict[str, Any] = {
        "steps": steps,
        "batch_size": settings.batch_size,
        "num_generations": settings.num_generations,
        "max_completion_length": settings.max_completion_length,
        "train_s": round(train_s, 2),
        "s_per_step": round(rate(train_s, steps), 3),
        "s_per_step_after_first": round(rate(sum(later), len(later)), 3) if later else None,
        "first_step_s": round(step_s[0], 2) if step_s else None,
        "completions_per_s": round(rate(completions, train_s), 2),
        "completions_per_s_after_first": (
            round(rate(len(later) * settings.batch_size, sum(later)), 2) if later else None
        ),
        "completion_tokens_per_s": round(rate(tokens, train_s), 1),
        "mean_completion_length": round(tokens / completions, 1) if completions else None,
        "rewards": [entry.get("reward") for entry in log],
        "step_s": [round(s, 3) for s in step_s],
    }
    try:
        import torch

        if torch.cuda.is_available():
            out["device"] = torch.cuda.get_device_name()
            out["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
            out["peak_gpu_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 3)
    except ImportError:
        pass
    return out


def report(result: dict[str, Any], output: Path) -> None:
    rewards = result["rewards"]
    shown = (
        rewards
        if len(rewards) <= 2 * SHOWN_STEPS
        else [*rewards[:SHOWN_STEPS], "...", *rewards[-SHOWN_STEPS:]]
    )
    lines = [
        f"policy resolved in {result['policy_s']} s, data loaded in {result['data_s']} s"
        f" ({result['rows']} rows trained on, left out: {result['left_out']})",
        f"steps {result['steps']} (batch {result['batch_size']}, groups of"
        f" {result['num_generations']}, <= {result['max_completion_length']} tokens)",
        f"train wall {result['train_s']} s: {result['s_per_step']} s/step"
        f" ({result['s_per_step_after_first']} s/step after step 1, which took"
        f" {result['first_step_s']} s)",
        f"completions/s {result['completions_per_s']}"
        f" ({result['completions_per_s_after_first']} after step 1),"
        f" completion tokens/s {result['completion_tokens_per_s']}"
        f" (mean length {result['mean_completion_length']})",
        f"peak GPU memory {result.get('peak_gpu_memory_gib', 'n/a')} GiB allocated,"
        f" {result.get('peak_gpu_reserved_gib', 'n/a')} GiB reserved"
        f" on {result.get('device', 'no GPU')}",
        "reward per step: " + ", ".join(r if isinstance(r, str) else f"{r:.3f}" for r in shown),
        f"total wall {result['total_s']} s",
        f"metrics: {output / 'metrics.jsonl'}",
        f"summary: {output / 'summary.json'}",
        f"bench:   {output / 'bench.json'}",
    ]
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, required=True, help="taskset version folder or its trl/ folder"
    )
    parser.add_argument("--policy", default=EMBEDDED, help="`embedded`, a model folder or hub id")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "taskfoundry-policy",
        help="where `embedded` is dequantised to (once)",
    )
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--out", type=Path, default=None, help="output folder of the run")
    parser.add_argument("--save", action="store_true", help="save the trained model too")
    parser.add_argument(
        "--cpu-smoke", action="store_true", help="smoke_settings() on CPU: checks the wiring"
    )
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    started = time.perf_counter()
    import torch
    from datasets import load_dataset

    if args.cpu_smoke:
        settings = smoke_settings()
    elif torch.cuda.is_available():
        settings = gpu_settings(args.steps)
    else:
        parser.error("no CUDA device: use --cpu-smoke for a CPU check")
    output = args.out or Path(tempfile.mkdtemp(prefix="train-gpu-"))
    output.mkdir(parents=True, exist_ok=True)
    (output / "metrics.jsonl").unlink(missing_ok=True)  # the step clock counts fresh lines

    t0 = time.perf_counter()
    policy = policy_path(args.policy, args.cache)
    policy_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    dataset = load_dataset("parquet", data_files=trl_files(args.data))["train"]
    data_s = time.perf_counter() - t0
    print(f"policy {policy}; {len(dataset)} rows; settings {settings}", flush=True)

    rewards: dict[str, RewardFunction] = {"verifier_reward": verifier_reward}
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    with StepClock(output / "metrics.jsonl") as clock:
        t0 = time.perf_counter()
        trained = train_grpo(
            policy, dataset, rewards, SCORED_TYPES, settings, output, save=args.save
        )
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        train_s = time.perf_counter() - t0

    result = {
        **figures(settings, trained.log, train_s, clock.durations()),
        "policy": policy,
        "policy_s": round(policy_s, 2),
        "data_s": round(data_s, 2),
        "rows": trained.rows,
        "left_out": trained.left_out,
        "total_s": round(time.perf_counter() - started, 2),
        "torch": torch.__version__,
    }
    (output / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    report(result, output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
