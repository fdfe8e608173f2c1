"""`foundry run --plan`'s sandbox time: the test runs code tasks will take, at the seconds per
test run the lake recorded, else at `DEFAULT_TEST_RUN_S`.

Test runs, by stage (rough on purpose, like `data.plan.defaults`):
- `replay`: the tests before and after each commit (`REPLAY_TEST_RUNS`), and each new
  repository's suite at its HEAD once;
- `rebuild`, `inject`: a repository's suite at its HEAD, then `TARGET_TEST_RUNS` per function
  rebuilt or bug injected (`[code] max_functions`, `max_bugs`);
- `verify`: each code candidate's admission (`judges.unit_tests.UnitTests.admit`): three fresh
  runs of its reference, the empty and the do-nothing attempts, three mutants, and the red
  team's admission attacks (four): `ADMISSION_TEST_RUNS`;
- `calibrate`: one per attempt at a code task.

Measured: each run records its sandbox stages' items and wall seconds (`StageContext.
sandbox_time`, in the run's summary); seconds per test run is their seconds over the test runs
their items make by the counts above. Sandboxes run side by side (`[sandbox] parallel`), so the
wall clock of verify and calibrate can be shorter than their summed test time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from data.config import FoundryConfig
from data.plan.defaults import VARIANTS, Work, attempts, made, tasks

DEFAULT_TEST_RUN_S = 2.0  # a small repository's suite in the sandbox, its start included
REPLAY_TEST_RUNS = 2
TARGET_TEST_RUNS = 2
ADMISSION_TEST_RUNS = 12


def _per_item(config: FoundryConfig) -> dict[str, float]:
    """Test runs per item of each sandbox stage (a commit; a repository)."""
    code = config.code
    return {
        "replay": REPLAY_TEST_RUNS,
        "rebuild": 1 + TARGET_TEST_RUNS * code.max_functions,
        "inject": 1 + TARGET_TEST_RUNS * code.max_bugs,
    }


def test_runs(config: FoundryConfig, work: Work, sandbox_stages: Sequence[str]) -> dict[str, float]:
    """Test runs by stage for `work`: the sandbox stages' (those with no count here are left
    out: `unknown_stages`), then verify's and calibrate's of code tasks."""
    per_item = _per_item(config)
    items = {"replay": work["repos"], "rebuild": work.repositories, "inject": work.repositories}
    runs = {stage: items[stage] * per_item[stage] for stage in sandbox_stages if stage in per_item}
    if "replay" in runs:
        runs["replay"] += work.repositories  # each new repository's suite at its HEAD
    runs["verify"] = made(config, work)["code"] * VARIANTS * ADMISSION_TEST_RUNS
    runs["calibrate"] = tasks(config, work)["code"] * attempts(config)
    return {stage: n for stage, n in runs.items() if n > 0}


def unknown_stages(config: FoundryConfig, sandbox_stages: Iterable[str]) -> list[str]:
    """The sandbox stages this module has no test-run count for."""
    return [stage for stage in sandbox_stages if stage not in _per_item(config)]


def measured_test_run_s(
    config: FoundryConfig, recorded: Iterable[Mapping[str, Mapping[str, float]]]
) -> tuple[float | None, int]:
    """Seconds per test run over the runs' recorded sandbox stages (`recorded`: each run's
    stage -> {items, seconds}), and how many runs recorded any; None where none did."""
    per_item = _per_item(config)
    seconds = runs = 0.0
    counted = 0
    for timings in recorded:
        known = {s: t for s, t in timings.items() if s in per_item and t.get("items")}
        if known:
            counted += 1
        for stage, timed in known.items():
            seconds += float(timed["seconds"])
            runs += float(timed["items"]) * per_item[stage]
    return (seconds / runs if runs else None), counted


@dataclass(frozen=True)
class SandboxPlan:
    """Test runs and their seconds by stage, at `seconds_per_test_run`, and what that rests on."""

    test_runs: dict[str, float]
    seconds_per_test_run: float
    basis: str

    @property
    def seconds(self) -> float:
        return sum(self.test_runs.values()) * self.seconds_per_test_run

    def to_json(self) -> dict[str, Any]:
        return {
            "basis": self.basis,
            "seconds_per_test_run": round(self.seconds_per_test_run, 3),
            "stages": [
                {"stage": stage, "test_runs": round(n, 1), "seconds": n * self.seconds_per_test_run}
                for stage, n in self.test_runs.items()
            ],
            "test_runs": round(sum(self.test_runs.values()), 1),
            "seconds": round(self.seconds, 1),
        }


def plan_sandbox(
    config: FoundryConfig,
    work: Work,
    sandbox_stages: Sequence[str],
    recorded: Iterable[Mapping[str, Mapping[str, float]]],
) -> SandboxPlan:
    """The sandbox time of a run over `work`, at the seconds per test run `recorded` shows
    (else the default)."""
    runs = test_runs(config, work, sandbox_stages)
    measured, counted = measured_test_run_s(config, recorded)
    if measured is not None:
        basis = f"{measured:.2f} s per test run, measured over {counted} earlier run(s)"
        return SandboxPlan(runs, measured, basis)
    basis = f"{DEFAULT_TEST_RUN_S:g} s per test run, the default: no earlier run recorded one"
    return SandboxPlan(runs, DEFAULT_TEST_RUN_S, basis)
