"""The unit-test verifier of code tasks: an attempt passes when, applied to the task's workspace
in the sandbox, every fail-to-pass test passes and every pass-to-pass test still passes.

A commit sequence has a checkpoint per step: the attempt's `## Step N` edits are applied in
order, each followed by its step's tests, and the reward is the share of checkpoints passed.
Edits to test files are set aside (and named in the reason): the task's tests decide, not the
solver's. Edits whose added code reaches for the grader (`judges.grader_reach`) score 0 as
`tampered` before anything runs. The gold self-check asks the same question of the reference
patch (must pass) and of the empty patch (must fail) before a code task is accepted.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data.languages import of_path
from data.records import Task, UnitTestsSpec, content_id
from harnesses.call_replay import ReplayError
from harnesses.edits import Edits
from harnesses.sandbox import Limits
from harnesses.trial import Step, Trial
from harnesses.workspace import files_at_start, try_steps
from judges import code_grading
from judges.code_grading import Graded
from judges.outside_check import Oracle
from judges.redteam.code_attacks import ADMISSION, admission_attacks
from judges.rewards import columns_of, completion_text, trainer_task
from judges.score import Score


def checkpoints_of(task: Task) -> list[code_grading.Point]:
    """A task's checkpoints: its sequence's, or the one its tests make."""
    test_patch = task.workspace.test_patch if task.workspace else ""
    return code_grading.points_of(task.verifier.model_dump(), test_patch)


FRESH_RUNS = 3  # the reference must pass on each: a flaky task is not admitted


@dataclass(frozen=True)
class GateFailure:
    """Why a code task is not admitted: the gate it failed (the funnel's reason) and what was
    seen."""

    reason: str
    detail: str

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


@dataclass
class UnitTests:
    """Scores code attempts for the repositories whose mirrors it knows; at most `parallel`
    sandboxes run at once."""

    mirrors: dict[str, Path]
    limits: Limits
    parallel: int = 1

    def __post_init__(self) -> None:
        self._slots = threading.BoundedSemaphore(self.parallel)
        self._checks: dict[str, list[Oracle | None]] = {}

    async def grade(self, task: Task, completion: str) -> Score:
        """Score a solver's reply (diffs or whole files; per step for a sequence) to `task`."""

        def graded() -> Graded:
            points, trier = checkpoints_of(task), self.trier(task)
            return code_grading.grade(completion, task.answer, points, trier, self.checks(task))

        return Score(*await asyncio.to_thread(graded))

    def checks(self, task: Task) -> list[Oracle | None]:
        """The task's outside checks (`judges.outside_check`), made once per reference, tests
        and workspace: two sandbox runs of its reference."""
        key = content_id(task.answer, task.verifier.model_dump(), task.workspace)
        if key not in self._checks:
            made = code_grading.outside_checks(task.answer, checkpoints_of(task), self.trier(task))
            self._checks.setdefault(key, made)
        return self._checks[key]

    async def self_check(self, task: Task) -> GateFailure | None:
        """The first admission gate the task fails (None: it passes them all): its reference
        is usable; a Python task has an outside check; the reference passes on FRESH_RUNS
        fresh runs; the empty attempt, a do-nothing attempt (the start's files given back
        with a comment added) and the red team's admission attacks score 0."""
        points = checkpoints_of(task)
        reference, notes = code_grading.edits_of(task.answer, len(points))
        if any(e is None for e in reference):
            return GateFailure("reference_unusable", "; ".join(notes))
        try:
            checks = await asyncio.to_thread(self.checks, task)
        except ReplayError as error:
            return GateFailure("no_outside_check", str(error))
        unchecked = next((c.judged(None) for c in checks if c is not None and not c.calls), "")
        if unchecked:
            return GateFailure("no_outside_check", unchecked.partition(": ")[2])
        golds = [await asyncio.to_thread(self.score, task, reference) for _ in range(FRESH_RUNS)]
        failed = [gold.why for gold in golds if gold.reward < 1.0]
        if len(failed) == FRESH_RUNS:
            return GateFailure("reference_fails", failed[0])
        if failed:
            passed = FRESH_RUNS - len(failed)
            return GateFailure("reference_flaky", f"{passed} of {FRESH_RUNS} runs: {failed[0]}")
        empty = await asyncio.to_thread(self.score, task, [None] * len(reference))
        if empty.reward > 0.0:
            return GateFailure("empty_attempt_passes", empty.why)
        files, tests = await asyncio.to_thread(self._start, task, reference)
        idle = await asyncio.to_thread(self.score, task, do_nothing(files, len(reference)))
        if idle.reward > 0.0:
            return GateFailure("do_nothing_passes", idle.why)
        attacked = await asyncio.to_thread(self._red_team, task, files, tests, checks)
        if attacked:
            return GateFailure("red_team_scores", attacked)
        return None

    def admitted(self, task: Task) -> str:
        """What an admitted task's gates found, in one line (the verify stage's detail)."""
        checks = self.checks(task)
        calls = sum(len(c.calls) for c in checks if c is not None)
        if checks[0] is None:
            return f"not Python, no outside check; reference passed {FRESH_RUNS} fresh runs"
        return (
            f"outside check: {calls} calls; reference passed {FRESH_RUNS} fresh runs; the empty"
            f" and a do-nothing attempt and {len(ADMISSION) + 1} red-team attacks scored 0"
        )

    def _start(self, task: Task, reference: list[Edits | None]) -> tuple[dict, dict]:
        """The files of the reference's first step as an attempt starts from them, and the
        start's test files."""
        assert task.workspace is not None and reference[0] is not None  # checked by the caller
        mirror = self.mirrors[task.workspace.repo_id]
        return files_at_start(mirror, task.workspace, sorted(reference[0].paths), self.limits)

    def _red_team(
        self, task: Task, files: dict[str, str], tests: dict[str, str], checks: list[Oracle | None]
    ) -> str:
        """The red team's admission attacks on a one-step Python task: the first that scored
        and why, or ""."""
        if len(checks) != 1 or checks[0] is None:
            return ""
        points, trier = checkpoints_of(task), self.trier(task)
        for attack in admission_attacks(tests):
            reward, why = code_grading.grade(
                attack.reply(files), task.answer, points, trier, checks
            )
            if reward > 0.0:
                return f"{attack.name}: {why}"
        return ""

    def score(self, task: Task, edits: list[Edits | None]) -> Score:
        """Apply each step's `edits` (None: nothing) to the task's workspace, each followed by
        its outside check and its checkpoint's tests."""
        points, trier = checkpoints_of(task), self.trier(task)
        return Score(*code_grading.score_edits(edits, points, trier, self.checks(task)))

    def trier(self, task: Task) -> code_grading.TrySteps:
        """Steps tried on `task`'s workspace rebuilt from its mirror, a sandbox slot held."""

        def tried(steps: list[Step]) -> list[Trial]:
            workspace = task.workspace
            if workspace is None or workspace.repo_id not in self.mirrors:
                raise LookupError(f"task {task.task_id}: its repository is not in the lake")
            with self._slots:
                return try_steps(self.mirrors[workspace.repo_id], workspace, steps, self.limits)

        return tried


def do_nothing(files: dict[str, str], steps: int) -> list[Edits | None]:
    """An attempt that edits `files` (path: text as it starts) and changes nothing they do:
    each given back whole with a comment added; nothing in the steps after the first."""
    commented = {
        p: f"{t.rstrip()}\n{of_path(p).comment} nothing changed\n" for p, t in files.items()
    }
    return [Edits(files=commented), *([None] * (steps - 1))]


def unit_test_reward(unit_tests: UnitTests) -> Callable[..., list[float | None]]:
    """A TRL reward function for code tasks (verifier type `unit_tests`): each completion is
    applied to the task's `workspace` column and its tests run in the sandbox, as calibration
    scores it; a commit sequence scores the share of checkpoints passed. Other verifier types,
    and tasks whose repository `unit_tests` has no mirror of, get None."""

    def reward(
        prompts: list[Any],
        completions: list[Any],
        verifier: list[str | dict[str, Any]],
        workspace: list[str | None],
        kind: list[str],
        solution: list[str] | None = None,
        answer: list[str] | None = None,
        **columns: Any,
    ) -> list[float | None]:
        specs, golds = columns_of(verifier, solution, answer)

        async def one(row: tuple) -> float | None:
            prompt, completion, spec, gold, room, task_kind = row
            if not isinstance(spec, UnitTestsSpec) or not room:
                return None
            task = trainer_task(prompt, gold, spec, task_kind, room)
            if task.workspace is None or task.workspace.repo_id not in unit_tests.mirrors:
                return None
            return (await unit_tests.grade(task, completion_text(completion))).reward

        async def run() -> list[float | None]:
            batch = zip(prompts, completions, specs, golds, workspace, kind, strict=True)
            return list(await asyncio.gather(*(one(row) for row in batch)))

        return asyncio.run(run())

    return reward
