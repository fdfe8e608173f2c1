"""Reward throughput: what the TRL reward function adds over the bare answer matcher.

A trainer calls `judges.verifier_types.trainer_rewards.verifier_reward` on every batch of
completions, with the taskset's columns (the verifier spec as JSON, the gold answer). This
measures, over the same rows, completions scored per second by:

- **match**: `data.runtime.answer_match.match` on each (completion, gold) pair, the spec already
  parsed (the baseline: the matching itself);
- **reward**: `verifier_reward` in batches of `--batch` rows, as TRL calls it (each row's spec
  parsed from JSON and validated, the completion's text taken from chat messages);
- **tool calls**: `verifier_reward` on tool-replay rows, `--group` completions per task (calls
  parsed from JSON and matched in order);
- **world replay**: `harnesses.world_replay.replay` of each completion's calls on a bundled world
  (`outdoor_shop`) from the task's initial state (the baseline of world scoring: DuckDB);
- **world reward**: `verifier_reward` on the same `--world-rows` rows (the world column parsed,
  the calls replayed, the final state compared).

Each prints completions per second and its ratio to **match**; the world phases also to
**world replay**. Run from the repository root:
`.venv/bin/python bench/rewards.py [--rows 20000] [--batch 16] [--world-rows 400]`.
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

from data.runtime.answer_match import match  # noqa: E402
from harnesses.world import World, WorldSpec, load_world_spec  # noqa: E402
from harnesses.world_replay import replay  # noqa: E402
from judges.verifier_types.trainer_rewards import verifier_reward  # noqa: E402

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
        worlds = {"world": [json.dumps(r["world"]) for r in part]} if "world" in part[0] else {}
        verifier_reward(
            prompts=[[{"role": "user", "content": "q"}]] * len(part),
            # world tasks: the harness's attempt JSON; others: a chat reply
            completions=[
                r["reply"] if worlds else [{"role": "assistant", "content": r["reply"]}]
                for r in part
            ],
            verifier=[json.dumps(r["spec"]) for r in part],
            solution=[r["gold"] for r in part],
            **worlds,
        )
    return time.perf_counter() - started


def world_rows(n: int) -> list[dict]:
    """Return tasks on the bundled shop world: half the completions make the gold call, half
    return a different quantity (a wrong final state)."""
    spec = load_world_spec(ROOT / "data" / "samples" / "worlds" / "outdoor_shop.toml")
    world = World(spec)
    initial = world.snapshot()
    world.close()
    gold = {"order_id": 88213, "sku": "POLE-TR", "qty": 1, "opened": True}
    final = replay(spec, initial, [("create_return", gold)]).final
    setup = {"world_id": spec.world_id, "spec": spec.model_dump_json(), "initial": initial}
    verifier = {"type": "world_state", "tool_calls": [{"name": "create_return", "arguments": gold}]}
    rows = []
    for i in range(n):
        made = gold if i % 2 == 0 else {**gold, "qty": 2}
        reply = json.dumps({"calls": [{"name": "create_return", "arguments": made}], "answer": ""})
        spec_row = {**verifier, "final_state": final}
        rows.append(
            {"gold": "", "reply": reply, "spec": spec_row, "world": setup | {"max_turns": 4}}
        )
    return rows


def through_world_replay(rows: list[dict]) -> float:
    started = time.perf_counter()
    for row in rows:
        spec = WorldSpec.model_validate_json(row["world"]["spec"])
        calls = [(c["name"], c["arguments"]) for c in json.loads(row["reply"])["calls"]]
        replay(spec, row["world"]["initial"], calls)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--group", type=int, default=8, help="completions per task (GRPO group)")
    parser.add_argument("--world-rows", type=int, default=400)
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
    worlds = world_rows(args.world_rows)
    scale = args.rows / args.world_rows  # world phases run fewer rows: rates per completion
    world_replay = through_world_replay(worlds) * scale
    phases["world replay"] = world_replay
    phases["world reward"] = through_reward(worlds, args.batch) * scale
    print(
        f"{args.rows} completions per phase ({args.world_rows} for the world phases),"
        f" reward batches of {args.batch}"
    )
    print(f"{'phase':<13} {'completions/s':>14} {'vs match':>9} {'vs replay':>10}")
    for name, seconds in phases.items():
        rate = args.rows / seconds
        versus = f"{world_replay / seconds:>10.3f}" if name.startswith("world") else ""
        print(f"{name:<13} {rate:>14,.0f} {baseline / seconds:>9.3f} {versus}")


if __name__ == "__main__":
    main()
