"""The code admission gates as `foundry stats` and the report show them (`data.lake.gates`), from
the `gates` records the verify stage writes (the gates themselves: tests/test_admission.py)."""

from __future__ import annotations

from data.lake import Gate, Lake, format_gates, gate_lines, gate_rows, version_gates
from data.review import render_report


def gate(task: str, name: str, passed: bool, share: float | None = None) -> Gate:
    return Gate(task_id=task, gate=name, passed=passed, detail=f"{name} of {task}", share=share)


def test_the_gates_are_counted_per_gate_in_the_order_they_are_taken(tmp_path):
    lake = Lake(tmp_path / "home")
    lake.write(
        "gates",
        [
            gate("a", "reference", True),
            gate("a", "fresh_runs", True, 1.0),
            gate("a", "outside_check", True),
            gate("a", "mutants", True, 2 / 3),
            gate("b", "reference", True),
            gate("b", "fresh_runs", False, 1 / 3),  # flaky: one run of three passed
            gate("c", "reference", True),
            gate("c", "fresh_runs", False, 0.0),  # fails every run: not flaky
            gate("d", "reference", True),
            gate("d", "fresh_runs", True, 1.0),
            gate("d", "outside_check", True),
            gate("d", "mutants", False, 0.0),
            gate("e", "reference", True),
            gate("e", "mutants", False).model_copy(update={"ran": False}),  # no mutant to try
        ],
        "run-1",
    )
    rows = {row["gate"]: row for row in gate_rows(lake)}
    assert list(rows) == ["reference", "fresh_runs", "outside_check", "mutants"]
    assert (rows["fresh_runs"]["passed"], rows["fresh_runs"]["failed"]) == (2, 2)
    assert rows["fresh_runs"]["flaky"] == 1
    assert (rows["mutants"]["passed"], rows["mutants"]["failed"], rows["mutants"]["not_run"]) == (
        1,
        1,
        1,
    )
    assert rows["mutants"]["mean_share"] == 1 / 3
    text = format_gates(gate_rows(lake))
    assert "fresh_runs: 2 passed, 2 kept out, 0 not run (1 flaky)" in text
    assert "mutants: 1 passed, 1 kept out, 1 not run; mean share of mutants killed 33%" in text
    version = version_gates(lake, ["a", "e"])  # a version holding task a (and e, kept out)
    assert version["tasks_passed"] == {
        "reference": 2,
        "fresh_runs": 1,
        "outside_check": 1,
        "mutants": 1,
    }  # e's mutants gate did not run: it is not counted as passed
    lines = gate_lines(version)
    assert "reference 2, fresh_runs 1, outside_check 1, mutants 1" in lines
    assert "  mutants 1 / 1 / 1" in lines
    page = render_report(lake, None).html
    section = page.split('<section id="gates">')[1].split("</section>")[0]
    assert "<td>fresh_runs</td>" in section and '<td class="num">33%</td>' in section


def test_a_lake_without_code_tasks_says_no_gate_was_taken(tmp_path):
    lake = Lake(tmp_path / "home")
    assert gate_rows(lake) == []
    assert "none taken" in format_gates([])
    assert gate_lines(version_gates(lake, [])).startswith("No code task was verified")
