"""The train stage: `foundry train --smoke` runs a multi-turn GRPO step of TRL on CPU with the
embedded SmolLM2 policy (dequantised from its GGUF): a doc-search and a world task in their
environments, calling their tools after a short warm start, scored by the taskset's reward
functions, each episode recorded as proxy records that `foundry ingest traces` reads back."""

from __future__ import annotations

import json
import random

import pytest
from datasets import Dataset

from flows.cli import main
from flows.train import taskset_version
from harnesses.trainer import shuffled, trainable


@pytest.mark.full
def test_train_smoke_runs_a_multi_turn_step_that_calls_tools_and_records_it(
    agentic_taskset, tmp_path, capsys
):
    ctx, version = agentic_taskset
    home = str(ctx.config.home)
    out = tmp_path / "run"
    argv = ["train", "--taskset", str(version.parent), "--smoke", "--out", str(out)]
    assert main([*argv, "--home", home]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["steps"] == 1 and not result["saved"]
    assert result["environments"] == {"doc_search": 1, "world": 1}  # one task of each
    assert result["warm_start_rows"] >= 2  # a gold call of each task, before GRPO
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    [logged] = [s for s in steps if "loss" in s]
    assert "rewards/verifier_reward/mean" in logged and "grad_norm" in logged
    assert logged["tools/call_frequency"] > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"]["num_generations"] == 2 and summary["hack_audit"] is not None

    # every episode is proxy records: a record per model turn, the tools offered with each
    assert result["episodes_recorded"] == 4  # two tasks, two episodes each
    records = ctx.lake.rows(
        "SELECT rollout_id, params, response FROM proxy_calls WHERE rollout_id LIKE 'train-%'"
    )
    called: dict[str, set[str]] = {}
    for record in records:
        offered = {t["function"]["name"] for t in json.loads(record["params"])["tools"]}
        kind = "doc_search" if offered == {"search", "read"} else "world"
        message = json.loads(record["response"])[0]["message"]
        for call in message.get("tool_calls") or []:  # a made-up tool is told it does not exist
            called.setdefault(kind, set()).add(call["function"]["name"])
    assert set(called) == {"doc_search", "world"}, called  # each task called tools

    # ... which `foundry ingest traces` turns into traces
    assert (
        main(["ingest", "traces", str(ctx.config.home / "lake" / "proxy_calls"), "--home", home])
        == 0
    )
    traces = ctx.lake.rows("SELECT origin, messages FROM traces WHERE origin LIKE '%#train-%'")
    assert traces and any(
        any(m["role"] == "tool" for m in json.loads(trace["messages"])) for trace in traces
    )


def test_only_rows_a_reward_scores_are_trained_on():
    specs = [{"type": "exact_or_f1"}, {"type": "rubric"}, {"type": "unit_tests"}]
    rows = Dataset.from_list([{"verifier": json.dumps(s)} for s in specs])
    kept, left_out = trainable(rows, ["exact_or_f1", "unit_tests"])
    assert len(kept) == 2 and left_out == {"rubric": 1}


def test_a_taskset_folder_means_its_latest_version(docqa_taskset, tmp_path):
    _, version, _ = docqa_taskset
    assert taskset_version(version.parent) == version.resolve()
    assert taskset_version(version) == version
    with pytest.raises(FileNotFoundError, match="neither a taskset version"):
        taskset_version(tmp_path)


def test_a_control_run_permutes_each_batchs_rewards_and_keeps_the_unscored():
    def reward(prompts, completions, **columns):
        return [None if c == "unscored" else float(len(c)) for c in completions]

    completions = ["a", "unscored", "bbb", "cc", "dddd", "unscored"]
    rng = random.Random(0)
    control = shuffled(reward, rng)

    batches = [control([None] * 6, completions) for _ in range(20)]

    assert all(b[1] is None and b[5] is None for b in batches)
    assert all(sorted(b[i] for i in (0, 2, 3, 4)) == [1.0, 2.0, 3.0, 4.0] for b in batches)
    assert any(b != reward([None] * 6, completions) for b in batches)  # moved, not kept
    assert control.__name__ == "reward"
