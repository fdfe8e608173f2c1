"""Train/eval splits that do not leak: related tasks always land on the same side.

Each exported task has group keys, as the type of source it is made from says (`Grouping`, one
per source type in `sources/`): the source documents it draws on, the repository commits it
starts from or reproduces, its production trace and intent cluster, or the world goal it was
planted from. Tasks sharing a key form one group, and a group is on one side only, so a policy
is never evaluated on a fact, a commit, a request type or a goal it was trained on.

A group's side is drawn once, from the hash of its smallest key against the eval share, and kept
in the lake (`splits` table): every later export of any taskset from the lake puts it on the
same side, so re-exports keep every task's split. A new task that joins keys already assigned to
different sides (a two-hop question across a train and an eval document) cannot go either way
without a leak: it is withheld from the export and counted in the manifest.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

TRAIN, EVAL = "train", "eval"
SPLITS = (TRAIN, EVAL)
DEFAULT_EVAL_SHARE = 0.2  # of the groups of related tasks, the share drawn to eval
WITHHELD = "groups_on_both_sides"
HELD_OUT = "eval_split"  # why a trainer's input leaves an eval task out
Row = dict[str, Any]


def split_file(split: str) -> str:
    """The file of one split's rows in a projection or package: `train.parquet`, `eval.parquet`."""
    return f"{split}.parquet"


@dataclass(frozen=True)
class Grouping:
    """How the tasks made from one type of source group: `label` and `text` say so in the
    manifest; `keys` gives a taskset row's group keys, or none where the row is not from it."""

    label: str
    text: str
    keys: Callable[[Row], list[str]]


def group_keys(row: Row, groupings: Sequence[Grouping]) -> list[str]:
    """The group keys of one taskset row, sorted: those of the first of `groupings` that has
    any for it, else the task's own (a group of one)."""
    for grouping in groupings:
        if keys := grouping.keys(row):
            return sorted(keys)
    return [f"task:{row['task_id']}"]


def knobs_of(row: Row) -> dict[str, Any]:
    """The generator's knobs of a taskset row (its `lineage` column)."""
    return json.loads(row["lineage"]).get("knobs", {})


def drawn_split(key: str, eval_share: float) -> str:
    """The side a new group whose smallest key is `key` is drawn to: eval when the key's hash,
    as a fraction of 2**64, is below `eval_share`."""
    fraction = int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:16], 16) / 2**64
    return EVAL if fraction < eval_share else TRAIN


@dataclass(frozen=True)
class SplitPlan:
    split_of: dict[str, str]  # task id -> train or eval
    withheld: list[str]  # task ids whose groups are already on both sides
    assigned: dict[str, str]  # group key -> side, for the keys first assigned by this plan
    groups: dict[str, int]  # side -> distinct group keys of its tasks

    def counts(self) -> dict[str, int]:
        tally = Counter(self.split_of.values())
        return {side: tally.get(side, 0) for side in SPLITS}


def plan_splits(
    keys_of: dict[str, list[str]], known: dict[str, str], eval_share: float
) -> SplitPlan:
    """Sides for the tasks `keys_of` maps to their group keys, given the sides `known` of
    keys assigned before: tasks linked by keys not yet assigned form one group, which follows
    the side its assigned keys are on, is drawn when it has none, and is withheld when they
    are on both sides."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for keys in keys_of.values():
        new = [k for k in keys if k not in known]
        for key in new[1:]:
            parent[root(key)] = root(new[0])
    anchors: dict[str, set[str]] = {}  # group (root of a new key, or the task) -> known sides
    members: dict[str, list[str]] = {}
    for task_id, keys in sorted(keys_of.items()):
        new = [k for k in keys if k not in known]
        group = root(new[0]) if new else f"\0{task_id}"
        anchors.setdefault(group, set()).update(known[k] for k in keys if k in known)
        members.setdefault(group, []).append(task_id)
    split_of: dict[str, str] = {}
    withheld: list[str] = []
    assigned: dict[str, str] = {}
    for group, tasks in sorted(members.items()):
        sides = anchors[group]
        if len(sides) > 1:
            withheld += tasks
            continue
        keys = sorted({k for t in tasks for k in keys_of[t]})
        side = sides.pop() if sides else drawn_split(keys[0], eval_share)
        split_of.update(dict.fromkeys(tasks, side))
        assigned.update({k: side for k in keys if k not in known})
    sides_of_keys = {k: split_of[t] for t, keys in keys_of.items() if t in split_of for k in keys}
    groups = Counter(sides_of_keys.values())
    return SplitPlan(
        split_of, sorted(withheld), assigned, {side: groups.get(side, 0) for side in SPLITS}
    )
