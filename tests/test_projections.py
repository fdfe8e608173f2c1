"""Trainer projections of an exported taskset (trl, verifiers, prime-rl, sft): each loads with
`datasets`, the reward functions score their gold answers, the verifiers v1 package loads in the
verifiers library's own virtualenv, and a re-export writes nothing."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import concatenate_datasets, load_dataset

from data.export import (
    SFT_SCHEMA,
    SPLITS,
    Tally,
    canonical_rows,
    episode_message,
    module_name,
    packaged,
    project,
    taskset_id,
)
from flows.cli import main
from judges.verifier_types import package_graders
from judges.verifier_types.trainer_rewards import verifier_reward
from tests.test_world_package import VERIFIERS_PYTHON, installed, verifiers_figures


def rows_of(path: Path):
    """A projection's rows, both splits (as `datasets` loads its split files)."""
    files = {split: str(path / f"{split}.parquet") for split in SPLITS}
    splits = load_dataset(
        "parquet", data_files={s: f for s, f in files.items() if Path(f).exists()}
    )
    return concatenate_datasets([splits[split] for split in SPLITS if split in splits])


def test_every_parquet_projection_loads_with_datasets(docqa_taskset):
    _, version, projections = docqa_taskset
    n_tasks = json.loads((version / "manifest.json").read_text())["n_tasks"]
    trl = rows_of(projections["trl"].path)
    assert len(trl) == n_tasks > 0
    assert {"prompt", "solution", "verifier", "kind", "task_id", "pool"} <= set(trl.column_names)
    assert trl[0]["prompt"][-1]["role"] == "user"
    classic = rows_of(projections["verifiers"].path)
    assert sorted(classic["example_id"]) == list(range(n_tasks))
    info = json.loads(classic[0]["info"])
    assert info["task_id"] == trl[0]["task_id"] and info["verifier"]["type"]
    assert classic[0]["question"] == classic[0]["prompt"][-1]["content"]
    sft = rows_of(projections["sft"].path)
    assert len(sft) == projections["sft"].rows > 0
    assert all(m[-1]["role"] == "assistant" for m in sft["messages"])
    assert set(sft["task_id"]) <= set(trl["task_id"]) and set(sft["reward"]) == {1.0}


def test_the_trl_reward_gives_every_gold_answer_full_marks(docqa_taskset):
    _, _, projections = docqa_taskset
    trl = rows_of(projections["trl"].path)
    gold = [[{"role": "assistant", "content": s}] for s in trl["solution"]]
    rewards = verifier_reward(trl["prompt"], gold, **{c: trl[c] for c in ("verifier", "solution")})
    types = [json.loads(v)["type"] for v in trl["verifier"]]
    scored = [r for r, t in zip(rewards, types, strict=True) if t == "exact_or_f1"]
    assert scored and set(scored) == {1.0}  # an empty list would pass `all` unseen
    assert all(r is None for r, t in zip(rewards, types, strict=True) if t != "exact_or_f1")
    wrong = verifier_reward(trl["prompt"], ["zzz"] * len(trl), trl["verifier"], trl["solution"])
    assert [r for r, t in zip(wrong, types, strict=True) if t == "exact_or_f1"] == [0.0] * len(
        scored
    )
    assert all(r is None for r, t in zip(wrong, types, strict=True) if t != "exact_or_f1")


def test_prime_rl_fragment_trains_on_the_package_with_calibrated_pools(docqa_taskset):
    _, version, projections = docqa_taskset
    config = tomllib.loads((projections["prime-rl"].path / "rl.toml").read_text())
    (source,) = config["orchestrator"]["train"]["source"]
    assert source["env"]["taskset"]["id"] == taskset_id("docqa")
    pools = source["sampler"]["pools"]
    assert [pools[p]["threshold"] for p in ("hard", "normal", "easy")] == [0.25, 0.75, 1.0]
    assert source["sampler"]["type"] == "difficulty_pool"


def test_the_v1_package_scores_gold_answers_1_in_the_verifiers_library(docqa_taskset, tmp_path):
    _, version, projections = docqa_taskset
    assert VERIFIERS_PYTHON.exists(), "the verifiers virtualenv is missing: run `make test`"
    package = projections["verifiers"].path / "taskset"
    env = installed(package, tmp_path)
    args = [taskset_id("docqa"), projections["prime-rl"].path / "rl.toml"]
    figures = verifiers_figures("verifiers_check.py", args, env, tmp_path)
    assert figures["id"] and figures["unique_keys"] and figures["env"] == "SingleAgentEnv"
    assert figures["tasks"] == projections["prime-rl"].rows > 0
    assert figures["gold"] == [1.0] * figures["tasks"] and all(figures["validated"])
    assert figures["wrong"] == figures["padded"] == [0.0] * figures["tasks"]
    eval_rows = canonical_rows(version)
    held_out = {t["task_id"] for t in eval_rows if t["split"] == "eval"}
    assert figures["held_out"] and set(figures["held_out"]) <= held_out
    assert set(figures["held_out"].values()) == {1.0}


def test_the_package_holds_the_tasks_it_can_score_and_counts_the_rest(docqa_taskset):
    _, version, projections = docqa_taskset
    left_out = sum(
        packaged(task, version, package_graders()) is not None for task in canonical_rows(version)
    )
    skipped = projections["verifiers"].skipped
    assert sum(skipped.values()) == left_out
    assert all(reason.startswith("from_v1_package:") for reason in skipped)
    readme = (projections["verifiers"].path / "taskset" / "README.md").read_text()
    assert f"vf-validate {taskset_id('docqa')}" in readme
    # the tasks calibrated by searching are packaged with their corpus and the search tools
    searching = [
        task
        for task in canonical_rows(version)
        if task["harness"] == "doc_search" and packaged(task, version, package_graders()) is None
    ]
    module = projections["verifiers"].path / "taskset" / module_name("docqa")
    assert searching and (module / "corpus.parquet").exists()
    assert f"| doc_qa | search | {len(searching)} |" in readme


def test_projecting_again_writes_nothing_and_a_torn_write_is_redone(docqa_taskset):
    ctx, version, projections = docqa_taskset
    again = project(version, "trl", ctx.lake, graders=package_graders())
    assert not again.written and again.rows == projections["trl"].rows
    (version / ".sft.tmp").mkdir()  # a write killed before its rename
    (version / ".sft.tmp" / "train.parquet").write_text("torn")
    assert not project(version, "sft", ctx.lake, graders=package_graders()).written
    with pytest.raises(ValueError, match="unknown export format"):
        project(version, "csv", ctx.lake, graders=package_graders())


def test_the_card_shows_the_difficulty_histogram_and_who_judged(docqa_taskset):
    """Per check, the judges that voted with their control figures, and the mean agreement of
    the decisions both of them voted on."""
    _, version, _ = docqa_taskset
    manifest = json.loads((version / "manifest.json").read_text())
    assert sum(manifest["difficulty_histogram"]) == manifest["n_tasks"]
    opened = manifest["judge_agreement"]["open_book"]
    assert opened["decisions"] >= manifest["n_tasks"]
    assert opened["decisions_with_several_votes"] == opened["decisions"]
    assert opened["mean_agreement"] == 1.0  # the oracle agrees with itself
    able = {"items": 12, "correct": 12, "accuracy": 1.0, "threshold": 0.6, "competent": True}
    assert [(j["role"], j["model"], j["votes"], j["controls"]) for j in opened["judges"]] == [
        ("judge:0", "fake-model", opened["decisions"], able),
        ("judge:1", "fake-model", opened["decisions"], able),
    ]
    card = (version / "README.md").read_text()
    assert "## Difficulty" in card and "0.9-1.0 |" in card
    [line] = [line for line in card.splitlines() if line.startswith("- open_book: ")]
    assert "judge:1 (fake-model, " in line and "12 of 12 control items right (100%" in line
    assert f"mean agreement 1.0 over the {opened['decisions']} decisions" in line


def test_agreement_counts_only_decisions_more_than_one_judge_voted_on():
    tally = Tally()
    row = {
        "kind": "world_tool_use",
        "intent": None,
        "band": "in_band",
        "pool": "normal",
        "harness": "world_tools",
        "pass_rate": 0.5,
        "pass_n": 8,
        "pass_ci_low": 0.2,
        "pass_ci_high": 0.8,
        "hackable": False,
        "solver_model": "s",
        "lineage": json.dumps({"knobs": {}, "model": "g"}),
        "source": None,
        "repo": None,
    }
    votes = [("judge:0", "pass"), ("judge:1", "pass"), ("judge:2", "error")]
    verdicts = [
        {"check": "instruction", "judge": judge, "judge_model": "m", "decision": decision}
        for judge, decision in votes
    ]
    for agreement in (1.0, 0.5, None):  # two votes agreeing, two split, one vote
        tally.add(row, verdicts, [{"check": "instruction", "agreement": agreement}])
    able = {"items": 12, "correct": 11, "accuracy": 0.917, "threshold": 0.6, "competent": True}
    [(check, figures)] = tally.judge_checks({("judge:0", "m"): able}).items()
    assert (figures["decisions"], figures["decisions_with_several_votes"]) == (3, 2)
    assert figures["mean_agreement"] == 0.75
    assert [(j["role"], j["votes"], j["controls"]) for j in figures["judges"]] == [
        ("judge:0", 3, able),
        ("judge:1", 3, None),  # its model's controls were never measured
    ]


def test_export_with_formats_through_the_cli(docqa_taskset, capsys):
    ctx, _, _ = docqa_taskset
    home = str(ctx.config.home)
    assert (
        main(
            [
                "export",
                "--home",
                home,
                "--out",
                str(ctx.config.home / "cli"),
                "--format",
                "trl",
                "--format",
                "sft",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "  trl: " in out and "  sft: " in out and "verifiers" not in out


def test_an_sft_episode_keeps_its_tool_calls_and_results(tmp_path):
    recorded = [
        {"role": "system", "content": "You run the shop's tools."},
        {"role": "user", "content": [{"type": "text", "text": "Restock the tent."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "restock", "arguments": '{"sku": "TENT-2", "qty": 3}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "name": "restock", "content": '{"ok": true}'},
        {"role": "assistant", "content": "Restocked 3 tents."},
    ]
    tools = [{"type": "function", "function": {"name": "restock", "parameters": {}}}]
    row = {
        "messages": [episode_message(m) for m in recorded],
        "tools": json.dumps(tools),
        "task_id": "t1",
        "kind": "world_tool_use",
        "attempt_id": "a1",
        "harness": "world_agent",
        "solver_model": "m",
        "reward": 1.0,
    }
    out = tmp_path / "sft"
    out.mkdir()
    pq.write_table(pa.Table.from_pylist([row], schema=SFT_SCHEMA), out / "train.parquet")
    (loaded,) = rows_of(out)
    system, user, call, result, answer = loaded["messages"]
    assert user["content"] == "Restock the tent." and not user["tool_calls"]
    assert call["tool_calls"][0]["function"] == {
        "name": "restock",
        "arguments": '{"sku": "TENT-2", "qty": 3}',
    }
    assert (result["role"], result["tool_call_id"], result["name"]) == ("tool", "call_1", "restock")
    assert answer == {**answer, "role": "assistant", "content": "Restocked 3 tents."}
    assert json.loads(loaded["tools"]) == tools
