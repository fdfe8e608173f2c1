"""Train/eval splits: related tasks on one side only, sides kept across exports, eval tasks
never trained on."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from datasets import Dataset

from data.export import (
    EVAL,
    HELD_OUT,
    TRAIN,
    drawn_split,
    export_taskset,
    group_keys,
    plan_splits,
    read_tasks,
)
from data.lake import Lake
from families import export_kinds
from harnesses.trainer import trainable
from sources import groupings
from tests.fakes.synthetic_lake import write_calibrated_tasks


def _one_or_two_documents(number: int) -> list[str]:
    """Task n reads document n % 40; every fifth also document (n + 7) % 40 (two hops)."""
    first = f"doc{number % 40:02d}"
    return [first, f"doc{(number + 7) % 40:02d}"] if number % 5 == 0 else [first]


def _export(lake: Lake, out, eval_share: float):
    result = export_taskset(
        lake, "split", out, kinds=export_kinds(), groupings=groupings(), eval_share=eval_share
    )
    rows = read_tasks(result.path).to_pylist()
    return json.loads((result.path / "manifest.json").read_text()), rows


def _sides_per_document(rows) -> dict[str, set[str]]:
    sides = defaultdict(set)
    for row in rows:
        for span in json.loads(row["source"]):
            sides[span["source_id"]].add(row["split"])
    return sides


def test_no_document_has_tasks_on_both_sides_and_the_manifest_counts_them(tmp_path):
    lake = Lake(tmp_path / "home")
    write_calibrated_tasks(lake, 0, 400, _one_or_two_documents)

    manifest, rows = _export(lake, tmp_path / "out", eval_share=0.3)

    sides = _sides_per_document(rows)
    assert all(len(s) == 1 for s in sides.values()), {d: s for d, s in sides.items() if len(s) > 1}
    by_side = {side: sum(r["split"] == side for r in rows) for side in (TRAIN, EVAL)}
    assert by_side[TRAIN] and by_side[EVAL] and sum(by_side.values()) == len(rows) == 400
    split = manifest["split"]
    assert split["tasks"] == by_side and split["withheld"] == {}
    groups = {side: sum(s == {side} for s in sides.values()) for side in (TRAIN, EVAL)}
    assert split["groups"] == groups and split["eval_share"] == 0.3
    assert set(split["grouping"]) == {"documents", "code", "traces", "worlds"}


def test_a_reexport_keeps_every_tasks_split_and_withholds_a_task_across_both(tmp_path):
    lake = Lake(tmp_path / "home")
    write_calibrated_tasks(lake, 0, 200, lambda n: [f"doc{n % 20:02d}"])
    _, first = _export(lake, tmp_path / "out", eval_share=0.3)
    side_of_doc = {d: s.pop() for d, s in _sides_per_document(first).items()}
    train_doc = min(d for d, s in side_of_doc.items() if s == TRAIN)
    eval_doc = min(d for d, s in side_of_doc.items() if s == EVAL)
    bridge = {1000: [train_doc, eval_doc]}  # a two-hop question across the two sides
    write_calibrated_tasks(
        lake, 1000, 1060, lambda n: bridge.get(n, [f"doc{n % 20:02d}"] if n < 1030 else ["new"])
    )

    manifest, second = _export(lake, tmp_path / "out", eval_share=0.9)

    before = {r["task_id"]: r["split"] for r in first}
    after = {r["task_id"]: r["split"] for r in second}
    assert {t: after[t] for t in before} == before
    assert f"{1000:016x}" not in after
    assert manifest["split"]["withheld"] == {"groups_on_both_sides": 1}
    sides = _sides_per_document(second)
    assert all(len(s) == 1 for s in sides.values())
    assert all(sides[d] == {side} for d, side in side_of_doc.items())  # new tasks joined them
    assert manifest["n_tasks"] == len(second) == 259


def test_plan_links_tasks_through_new_keys_and_follows_known_ones():
    keys_of = {
        "a": ["document:1", "document:2"],
        "b": ["document:2"],
        "c": ["document:3", "document:9"],  # 9 is known: eval
        "d": ["document:3"],
        "e": ["document:4", "document:8"],  # 8 is train, joined through 4 to 7 (eval) via f
        "f": ["document:4", "document:7"],
    }
    known = {"document:9": EVAL, "document:8": TRAIN, "document:7": EVAL}

    plan = plan_splits(keys_of, known, eval_share=0.0)  # a drawn group would go to train

    assert plan.split_of == {"a": TRAIN, "b": TRAIN, "c": EVAL, "d": EVAL}
    assert plan.withheld == ["e", "f"]
    assert plan.assigned == {
        "document:1": TRAIN,
        "document:2": TRAIN,
        "document:3": EVAL,
    }  # a withheld task's new key stays free


def test_group_keys_per_kind_of_task():
    base = {"task_id": "t", "source": "[]", "workspace": None, "world": None, "lineage": "{}"}
    sequence = {
        **base,
        "workspace": json.dumps({"base": "aaa", "repo_id": "r"}),
        "lineage": json.dumps({"knobs": {"commits": "bbb+ccc"}}),
    }
    replay = {**sequence, "lineage": json.dumps({"knobs": {"commit": "bbb"}})}
    trace = {**base, "trace_id": "tr1", "intent": "refund"}
    world = {
        **base,
        "world": json.dumps({"world_id": "shop@1#ab"}),
        "lineage": json.dumps({"knobs": {"goal": "find_customer?email"}}),
    }
    two_hop = {**base, "source": json.dumps([{"source_id": "d2"}, {"source_id": "d1"}])}

    assert group_keys(sequence, groupings()) == ["commit:aaa", "commit:bbb", "commit:ccc"]
    assert group_keys(replay, groupings()) == ["commit:aaa", "commit:bbb"]
    assert group_keys(trace, groupings()) == ["intent:refund", "trace:tr1"]
    assert group_keys(world, groupings()) == ["goal:shop@1#ab/find_customer"]
    assert group_keys(two_hop, groupings()) == ["document:d1", "document:d2"]
    assert group_keys(base, groupings()) == ["task:t"]


def test_training_leaves_the_eval_split_out_and_counts_it():
    spec = json.dumps({"type": "exact_or_f1"})
    judged = json.dumps({"type": "llm_equivalence"})
    rows = [
        {"verifier": spec, "split": TRAIN, "task_id": "a"},
        {"verifier": spec, "split": EVAL, "task_id": "b"},
        {"verifier": judged, "split": TRAIN, "task_id": "c"},
        {"verifier": judged, "split": EVAL, "task_id": "d"},
    ]

    kept, left_out = trainable(Dataset.from_list(rows), ["exact_or_f1"])

    assert kept["task_id"] == ["a"]
    assert left_out == {HELD_OUT: 2, "llm_equivalence": 1}


@pytest.mark.parametrize("share", [0.1, 0.3, 0.5])
def test_the_eval_side_takes_the_share_asked_for(share):
    """Of 4,000 groups, the share drawn to eval is the one asked for, within 0.02 (about three
    standard deviations of a fair draw; the draw hashes the key, so the figure never moves)."""
    keys = [f"document-{n}" for n in range(4000)]
    drawn = sum(drawn_split(key, share) == EVAL for key in keys) / len(keys)
    assert abs(drawn - share) < 0.02, drawn
