"""Reward throughput: what the TRL reward function adds over the bare answer matcher.

A trainer calls `judges.rewards.verifier_reward` on every batch of completions, with the
taskset's columns (the verifier spec as JSON, the gold answer). This measures, over the same
rows, completions scored per second by:

- **match**: `judges.answer_match.match` on each (completion, gold) pair, the spec already
  parsed (the baseline: the matching itself);
- **reward**: `verifier_reward` in batches of `--batch` rows, as TRL calls it (each row's spec
  parsed from JSON and validated, the completion's text taken from chat messages);
- **tool calls**: `verifier_reward` on tool-replay rows, `--group` completions per task (calls
  parsed from JSON and matched in order).

Each prints completions per second and its ratio to **match**. Run from the repository root:
`.venv/bin/python bench/rewards.py [--rows 20000] [--batch 16]`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from judges.answer_match import match  # noqa: E402
from judges.rewards import verifier_reward  # noqa: E402

WORDS = [
    "river",
    "bridge",
    "council",
    "harbour",
    "ledger",
    "tariff",
    "spring",
    "quarry",
    "mill",
    "charter",
]


def qa_rows(n: int, rng: random.Random) -> list[dict]:
    """Gold answers of 1-4 words; completions exact, near (one word changed) or wrong."""
    rows = []
    for i in range(n):
        gold = " ".join(rng.choices(WORDS, k=rng.randint(1, 4))) + f" {1800 + i % 200}"
        words = gold.split()
        kind = i % 3
        if kind == 1:
            words[0] = rng.choice(WORDS)
        elif kind == 2:
            words = rng.choices(WORDS, k=3)
        reply = "Answer: " + " ".join(words)
        spec = {"type": "exact_or_f1", "f1_threshold": 0.6}
        rows.append({"gold": gold, "reply": reply, "spec": spec})
    return rows


def tool_rows(n: int, group: int) -> list[dict]:
    """Tasks expecting 2-3 calls (with an id and an amount), each seen by a GRPO group of
    `group` attempts that make the calls or miss the last one."""
    rows = []
    for i in range(n):
        task = i // group
        calls = [
            {"name": f"tool_{k}", "arguments": {"order_id": f"ORD-{task}{k}", "amount": k * 10.5}}
            for k in range(2 + task % 2)
        ]
        made = calls if i % 2 == 0 else calls[:-1]
        reply = json.dumps({"calls": made, "answer": "done"})
        spec = {"type": "tool_calls", "tool_calls": calls}
        rows.append({"gold": reply, "reply": reply, "spec": spec})
    return rows


def through_reward(rows: list[dict], batch: int) -> float:
    started = time.perf_counter()
    for start in range(0, len(rows), batch):
        part = rows[start : start + batch]
        verifier_reward(
            prompts=[[{"role": "user", "content": "q"}]] * len(part),
            completions=[[{"role": "assistant", "content": r["reply"]}] for r in part],
            verifier=[json.dumps(r["spec"]) for r in part],
            solution=[r["gold"] for r in part],
        )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--group", type=int, default=8, help="completions per task (GRPO group)")
    args = parser.parse_args()
    rng = random.Random(0)
    qa, tools = qa_rows(args.rows, rng), tool_rows(args.rows, args.group)

    started = time.perf_counter()
    for row in qa:
        match(row["reply"], row["gold"], row["spec"]["f1_threshold"])
    baseline = time.perf_counter() - started
    phases = {
        "match": baseline,
        "reward": through_reward(qa, args.batch),
        "tool calls": through_reward(tools, args.batch),
    }
    print(f"{args.rows} completions per phase, reward batches of {args.batch}")
    print(f"{'phase':<12} {'completions/s':>14} {'vs match':>9}")
    for name, seconds in phases.items():
        rate = args.rows / seconds
        print(f"{name:<12} {rate:>14,.0f} {baseline / seconds:>9.3f}")


if __name__ == "__main__":
    main()
