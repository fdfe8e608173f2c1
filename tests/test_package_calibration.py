"""The exported verifiers package reproduces calibration: every attempt the calibration graded
(doc-search episodes' answers, world episodes' calls and answers) scores the same through the
package's reward as taskfoundry gave it, so each task's pass rate through the package is its
calibrated pass rate, inside its interval."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from data.export import canonical_rows, project, taskset_id, write_rl_toml
from judges.verifier_types import package_graders
from tests.test_world_package import installed, needs_verifiers, verifiers_figures


def turns_of(response: str, harness: str) -> list[dict[str, Any]]:
    """A calibration attempt as the package's trace turns: a world attempt's calls (one turn
    each) then its answer; any other attempt's final reply."""
    if harness.startswith("world"):
        attempt = json.loads(response)
        calls = [{"calls": [[c["name"], c["arguments"]]]} for c in attempt["calls"]]
        return [*calls, {"reply": attempt["answer"]}]
    return [{"reply": response}]


@needs_verifiers
def test_calibration_attempts_score_the_same_through_the_package(agentic_taskset, tmp_path):
    ctx, version = agentic_taskset
    tasks = {t["task_id"]: t for t in canonical_rows(version)}
    attempts = ctx.lake.rows(
        "SELECT attempt_id, task_id, harness, response, reward FROM attempts"
        " WHERE list_contains(?, task_id) ORDER BY attempt_id",
        [list(tasks)],
    )
    calibrated = [a for a in attempts if a["harness"] == tasks[a["task_id"]]["harness"]]
    assert {tasks[a["task_id"]]["kind"] for a in calibrated} == {"doc_qa", "world_tool_use"}
    cases = defaultdict(lambda: {"completions": {}, "calls": []})
    for attempt in calibrated:
        turns = turns_of(attempt["response"], attempt["harness"])
        cases[attempt["task_id"]]["completions"][attempt["attempt_id"]] = turns

    package = project(version, "verifiers", ctx.lake, graders=package_graders()).path / "taskset"
    write_rl_toml(tmp_path / "rl.toml", version, list(tasks.values()), package_graders())
    env = installed(package, tmp_path)
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    name = json.loads((version / "manifest.json").read_text())["name"]
    args = [taskset_id(name), "cases.json", tmp_path / "rl.toml"]
    figures = verifiers_figures("verifiers_family_check.py", args, env, tmp_path)
    graded = figures["rewards"]

    assert set(graded) == set(cases)  # every task with calibration attempts is packaged
    turn_limits = {tasks[t]["harness"]: limit for t, (_, _, limit) in figures["tasks"].items()}
    assert turn_limits["doc_search"] == ctx.config.calibrate.max_turns == 3  # as calibrated
    for attempt in calibrated:
        assert graded[attempt["task_id"]][attempt["attempt_id"]] == attempt["reward"], attempt
    for task_id, rewards in graded.items():
        task = tasks[task_id]
        pass_rate = sum(r >= 1.0 for r in rewards.values()) / len(rewards)
        assert task["pass_ci_low"] <= pass_rate <= task["pass_ci_high"], task_id
