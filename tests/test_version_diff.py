"""`foundry diff`: two taskset versions compared, in the CLI, as JSON and on the report page."""

from __future__ import annotations

import json
import shutil

import pytest

from data.export import previous_version, read_tasks
from data.review import diff_versions, format_diff, render_report
from flows.cli import main
from tests.exported_files import rewrite_tasks


@pytest.fixture
def two_versions(docqa_taskset, tmp_path):
    """The fixture's version as `v0001` of a taskset in a fresh home, and a `v0002` made from
    it: its first task's band moved, its second's instruction edited by a reviewer (a new task
    id whose lineage names the original), its third removed and a new task added."""
    ctx, version, _ = docqa_taskset
    root = tmp_path / "home" / "tasksets" / "docqa"
    first = root / "v0001"
    shutil.copytree(version, first, symlinks=True)
    rows = read_tasks(first).to_pylist()
    assert len(rows) >= 4
    moved, edited, removed, template = rows[0], rows[1], rows[2], rows[3]
    moved = moved | {
        "band": "too_easy" if moved["band"] != "too_easy" else "in_band",
        "pass_rate": 0.97 if moved["band"] != "too_easy" else 0.5,
    }
    lineage = json.loads(edited["lineage"]) | {
        "review": {
            "action": "edited",
            "task_id": edited["task_id"],
            "decision_id": "d",
            "reviewer": "ana",
            "reason": "",
            "note": "",
        }
    }
    prompt = [
        m | {"content": "Edited: " + m["content"]} if m["role"] == "user" else m
        for m in edited["prompt"]
    ]
    edited = edited | {"task_id": "edited-task", "prompt": prompt, "lineage": json.dumps(lineage)}
    added = template | {"task_id": "added-task", "lineage": "{}"}
    second = root / "v0002"
    shutil.copytree(first, second, symlinks=True)
    kept = [moved, edited, *rows[3:], added]
    rewrite_tasks(second, kept)
    (root / "latest").symlink_to("v0002")
    return ctx, first, second, {"moved": rows[0], "edited": rows[1], "removed": removed}


def family(row: dict) -> str:
    """What the diff follows a task by: the original its repair or edit came from."""
    return (json.loads(row["lineage"]).get("repair") or {}).get("root") or row["task_id"]


def test_the_diff_follows_a_task_through_edits_and_band_moves(two_versions):
    _, first, second, original = two_versions
    diff = diff_versions(first, second)

    assert (diff.n_before, diff.n_after) == (diff.n_after, diff.n_before)
    assert [c.after["task_id"] for c in diff.added] == ["added-task"]
    assert [c.before["task_id"] for c in diff.removed] == [original["removed"]["task_id"]]
    changed = {c.before["task_id"]: c for c in diff.changed}
    assert set(changed) == {original["moved"]["task_id"], original["edited"]["task_id"]}
    assert changed[original["edited"]["task_id"]].fields == ("instruction",)
    assert changed[original["edited"]["task_id"]].after["task_id"] == "edited-task"
    assert set(changed[original["moved"]["task_id"]].fields) == {"band", "pass_rate"}
    assert {c.family for c in diff.changed} == {
        family(original["moved"]),
        family(original["edited"]),
    }
    assert sum(diff.band_shifts.values()) == 1
    assert diff.unchanged == diff.n_before - 3
    totals = {k: sum(g[k] for g in diff.by_group.values()) for k in ("added", "removed", "changed")}
    assert totals == {"added": 1, "removed": 1, "changed": 2}
    text = format_diff(diff)
    assert "+1 added, -1 removed, 2 changed" in text and "band shifts: " in text
    assert previous_version(second) == first.resolve() and previous_version(first) is None


def test_foundry_diff_compares_the_latest_with_the_one_before(two_versions, capsys):
    ctx, first, second, _ = two_versions
    home = str(first.parent.parent.parent)
    assert main(["diff", "--home", home]) == 0
    assert capsys.readouterr().out.startswith("docqa/v0001 -> docqa/v0002:")
    assert main(["diff", "--home", home, "v0001", "docqa/v0002", "--json"]) == 0
    named = json.loads(capsys.readouterr().out)
    assert main(["diff", "--home", home, str(first), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == named
    assert len(named["added"]) == 1 and named["added"][0]["after"]["answer"]

    assert main(["diff", "--home", home, "v0009"]) == 2
    assert "v0009" in capsys.readouterr().err
    shutil.rmtree(second)
    (first.parent / "latest").unlink()
    assert main(["diff", "--home", home]) == 2
    assert "has 1)" in capsys.readouterr().err
    assert main(["diff", "--home", home, "v0001"]) == 2  # the one version with itself
    assert main(["diff", "--home", home, "v0001", "v0001"]) == 2
    assert capsys.readouterr().err.count("two different versions") == 2


def test_the_report_page_shows_the_changes(two_versions):
    ctx, first, second, _ = two_versions
    page = render_report(ctx.lake, second).html
    section = page[
        page.index('id="changes"') : page.index("</section>", page.index('id="changes"'))
    ]
    assert "docqa/v0001 → docqa/v0002" in section and "added-task" in section
    assert "no earlier version" in render_report(ctx.lake, first).html
