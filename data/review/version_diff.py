"""What changed between two versions of a taskset: tasks added, removed and changed, per
family and split, and how the bands moved.

A task is followed across versions by its family: the original a repair or a reviewer's edit
came from (`lineage.repair.root`, an edit's `lineage.review.task_id`), else its own id; so a
variant that replaced its original, or an edited instruction, shows as a change, not as one
task removed and another added. The versions' parquet parts are read by DuckDB, never loaded whole.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from data.export import previous_version
from data.html_page import empty_note, escaped, table
from data.lake import Lake, latest_decisions

COMPARED = ("instruction", "answer", "verifier", "band", "pass_rate", "split")
LISTED = 20  # tasks listed per section in the text form (the JSON form lists every one)

_TASKS_SQL = """
SELECT coalesce(json_extract_string(lineage, '$.repair.root'),
                CASE json_extract_string(lineage, '$.review.action')
                    WHEN 'edited' THEN json_extract_string(lineage, '$.review.task_id') END,
                task_id) AS family,
       task_id, kind, split, band, pass_rate, answer, verifier,
       list_filter(prompt, lambda m: m.role = 'user')[-1].content AS instruction
FROM read_parquet({parts})
"""
_PAIRS_SQL = """
WITH a AS ({a}), b AS ({b})
SELECT coalesce(a.family, b.family) AS family, {columns}
FROM a FULL OUTER JOIN b ON a.family = b.family
ORDER BY family
"""


@dataclass(frozen=True)
class TaskChange:
    """One task family's difference between the versions: `fields` changed (none for a task
    added or removed), with the task as it was (`before`) and is (`after`)."""

    family: str
    kind: str
    split: str
    fields: tuple[str, ...]
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass
class VersionDiff:
    """Two taskset versions compared; `decisions` are reviewers' latest decisions on the
    tasks concerned (`data.lake.curation`), where a lake was given."""

    before: str
    after: str
    n_before: int = 0
    n_after: int = 0
    added: list[TaskChange] = field(default_factory=list)
    removed: list[TaskChange] = field(default_factory=list)
    changed: list[TaskChange] = field(default_factory=list)
    unchanged: int = 0
    by_group: dict[str, dict[str, int]] = field(default_factory=dict)  # "kind/split" -> counts
    bands_before: dict[str, int] = field(default_factory=dict)
    bands_after: dict[str, int] = field(default_factory=dict)
    band_shifts: dict[str, int] = field(default_factory=dict)  # "too_easy -> in_band" -> n
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)  # task id -> decision

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def task_ids(self) -> list[str]:
        """Every task id the diff names, before and after."""
        changes = [*self.added, *self.removed, *self.changed]
        return sorted({t["task_id"] for c in changes for t in (c.before, c.after) if t})


def diff_versions(before: Path, after: Path, lake: Lake | None = None) -> VersionDiff:
    """Compare taskset version folders `before` and `after` (each with its parquet parts);
    with the `lake`, the reviewers' decisions on the tasks the diff names."""
    diff = VersionDiff(before=_label(before), after=_label(after))
    groups: dict[str, Counter] = {}
    bands_before: Counter = Counter()
    bands_after: Counter = Counter()
    shifts: Counter = Counter()
    for family, a, b in _pairs(before, after):
        if a:
            diff.n_before += 1
            _group(groups, a)["before"] += 1
            bands_before[a["band"]] += 1
        if b:
            diff.n_after += 1
            _group(groups, b)["after"] += 1
            bands_after[b["band"]] += 1
        if a and b and a["band"] != b["band"]:
            shifts[f"{a['band']} -> {b['band']}"] += 1
        change = _change(family, a, b)
        group = _group(groups, b or a)
        if change is None:
            diff.unchanged += 1
        elif a is None:
            diff.added.append(change)
            group["added"] += 1
        elif b is None:
            diff.removed.append(change)
            group["removed"] += 1
        else:
            diff.changed.append(change)
            group["changed"] += 1
    columns = ("before", "after", "added", "removed", "changed")
    diff.by_group = {
        name: {c: counts[c] for c in columns} for name, counts in sorted(groups.items())
    }
    diff.bands_before, diff.bands_after = (
        dict(sorted(bands_before.items())),
        dict(sorted(bands_after.items())),
    )
    diff.band_shifts = dict(sorted(shifts.items()))
    if lake is not None:
        diff.decisions = latest_decisions(lake, diff.task_ids())
    return diff


def _group(groups: dict[str, Counter], task: dict[str, Any]) -> Counter:
    return groups.setdefault(f"{task['kind']}/{task['split']}", Counter())


def _pairs(before: Path, after: Path):
    """Each task family with its row in `before` and in `after` (None where it has none)."""
    fields = ("task_id", "kind", "split", "band", "pass_rate", "answer", "verifier", "instruction")
    columns = ", ".join(f"a.{f} AS a_{f}, b.{f} AS b_{f}" for f in fields)
    sql = _PAIRS_SQL.format(
        a=_TASKS_SQL.format(parts=_parts(before)),
        b=_TASKS_SQL.format(parts=_parts(after)),
        columns=columns,
    )
    with duckdb.connect() as con:
        reader = con.sql(sql).to_arrow_reader(10_000)
        for batch in reader:
            for row in batch.to_pylist():
                a = {f: row[f"a_{f}"] for f in fields} if row["a_task_id"] else None
                b = {f: row[f"b_{f}"] for f in fields} if row["b_task_id"] else None
                yield row["family"], a, b


def _change(family: str, a: dict[str, Any] | None, b: dict[str, Any] | None) -> TaskChange | None:
    """The family's change, or None where it is in both versions alike."""
    task = b or a
    assert task is not None
    fields = tuple(f for f in COMPARED if a and b and not _same(a[f], b[f]))
    if a and b and not fields:
        return None
    return TaskChange(family, task["kind"], task["split"], fields, _shown(a), _shown(b))


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return abs(x - y) < 1e-9
    return x == y


def _shown(task: dict[str, Any] | None) -> dict[str, Any] | None:
    if task is None:
        return None
    keys = ("task_id", "band", "pass_rate", "split", "instruction", "answer")
    return {k: task[k] for k in keys}


def _parts(version: Path) -> str:
    """The version's parquet files as a DuckDB list literal, as its manifest lists them."""
    files = json.loads((version / "manifest.json").read_text())["files"]
    quoted = ("'" + str(version / name).replace("'", "''") + "'" for name in files)
    return "[" + ", ".join(quoted) + "]"


def _label(version: Path) -> str:
    return f"{version.resolve().parent.name}/{version.resolve().name}"


def format_diff(diff: VersionDiff, listed: int = LISTED) -> str:
    """The diff as text: the totals, a table per family and split, band moves, then the tasks
    added, removed and changed (`listed` of each)."""
    lines = [
        f"{diff.before} -> {diff.after}: {diff.n_before} -> {diff.n_after} tasks:"
        f" +{len(diff.added)} added, -{len(diff.removed)} removed,"
        f" {len(diff.changed)} changed, {diff.unchanged} unchanged"
    ]
    if diff.by_group:
        lines.append(
            f"  {'family/split':<28} {'before':>6} {'after':>6} {'added':>6} {'removed':>7}"
            f" {'changed':>7}"
        )
        for name, c in diff.by_group.items():
            lines.append(
                f"  {name:<28} {c['before']:>6} {c['after']:>6} {c['added']:>6}"
                f" {c['removed']:>7} {c['changed']:>7}"
            )
    bands = sorted(set(diff.bands_before) | set(diff.bands_after))
    lines.append(
        "bands: "
        + (
            ", ".join(
                f"{b} {diff.bands_before.get(b, 0)} -> {diff.bands_after.get(b, 0)}" for b in bands
            )
            or "none"
        )
    )
    if diff.band_shifts:
        lines.append("band shifts: " + ", ".join(f"{s} {n}" for s, n in diff.band_shifts.items()))
    for title, changes in (
        ("added", diff.added),
        ("removed", diff.removed),
        ("changed", diff.changed),
    ):
        if not changes:
            continue
        lines.append(f"{title}:")
        lines += [f"  {_change_line(c, diff.decisions)}" for c in changes[:listed]]
        if len(changes) > listed:
            lines.append(f"  ... and {len(changes) - listed} more (--json lists every one)")
    return "\n".join(lines)


def _change_line(change: TaskChange, decisions: dict[str, dict[str, Any]]) -> str:
    task = change.after or change.before
    assert task is not None
    head = f"{change.kind} {task['task_id'][:12]} ({change.split}, {task['band']})"
    if change.fields:
        a, b = change.before or {}, change.after or {}
        parts = []
        for f in change.fields:
            if f == "pass_rate":
                parts.append(f"pass rate {a[f]:.2f} -> {b[f]:.2f}")
            elif f in ("band", "split"):
                parts.append(f"{f} {a[f]} -> {b[f]}")
            else:
                parts.append(f)
        head += ": " + ", ".join(parts)
    text = f'{head} "{_short(task["instruction"] or "")}"'
    decided = decision_on(change, decisions)
    if decided:
        text += f" [review: {decided['decision']}" + (
            f", {decided['reason']}]" if decided.get("reason") else "]"
        )
    return text


def decision_on(change: TaskChange, decisions: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The reviewers' decision on a changed task: on the task it is now, else on the one it
    was (an edit's original, a rejected task)."""
    now = change.after or change.before
    return decisions.get(now["task_id"]) or (
        decisions.get(change.before["task_id"]) if change.before else None
    )


def _short(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def changes_html(lake: Lake, version: Path | None) -> str:
    """The report page's section: `version` against the one before it, with the reviewers'
    decisions on the tasks listed."""
    before = previous_version(version) if version else None
    if version is None or before is None:
        return empty_note("no earlier version to compare with")
    diff = diff_versions(before, version, lake)
    groups = [[name, *counts.values()] for name, counts in diff.by_group.items()]
    shifts = ", ".join(f"{s} {n}" for s, n in diff.band_shifts.items()) or "none"
    listed = []
    for title, changes in (
        ("added", diff.added),
        ("removed", diff.removed),
        ("changed", diff.changed),
    ):
        for c in changes[:LISTED]:
            task = c.after or c.before
            review = decision_on(c, diff.decisions)
            listed.append(
                [
                    title,
                    c.kind,
                    task["task_id"][:12],
                    ", ".join(c.fields) or "-",
                    _short(task["instruction"] or "", 120),
                    f"{review['decision']} {review['reason']}".strip() if review else "",
                ]
            )
    summary = (
        f"{diff.before} → {diff.after}: {diff.n_before} → {diff.n_after} tasks,"
        f" {len(diff.added)} added, {len(diff.removed)} removed, {len(diff.changed)} changed,"
        f" {diff.unchanged} unchanged; band shifts: {shifts}"
    )
    header = ["", "family", "task", "what changed", "instruction", "review"]
    return (
        f"<p>{escaped(summary)}</p>\n"
        + table(["family/split", "before", "after", "added", "removed", "changed"], groups)
        + (table(header, listed) if listed else "")
    )
