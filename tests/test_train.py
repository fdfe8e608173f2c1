"""The train stage: `foundry train --smoke` runs two GRPO steps of TRL on CPU with the embedded
SmolLM2 policy (dequantised from its GGUF) and the taskset's reward functions."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset

from flows.cli import main
from flows.train import taskset_version
from harnesses.trainer import trainable


def test_train_smoke_runs_two_grpo_steps_on_cpu(docqa_taskset, tmp_path, capsys):
    ctx, version, _ = docqa_taskset
    out = tmp_path / "run"
    argv = ["train", "--taskset", str(version.parent), "--smoke", "--out", str(out)]
    assert main([*argv, "--home", str(ctx.config.home)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["steps"] == 2 and not result["saved"]
    assert len(result["rewards"]) == 2 and all(0.0 <= r <= 1.0 for r in result["rewards"])
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    logged = [s for s in steps if "loss" in s]
    assert [s["step"] for s in logged] == [1, 2]
    assert all("rewards/verifier_reward/mean" in s and "grad_norm" in s for s in logged)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["settings"]["num_generations"] == 2
    audit = summary["hack_audit"]  # rewarded completions sampled, the non-gold ones audited
    assert audit == result["hack_audit"] and audit["checked"] <= audit["sampled"] <= 8
    assert audit["flagged"] == len(audit["examples"]) <= audit["checked"]


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
