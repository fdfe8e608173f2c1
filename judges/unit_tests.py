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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data.languages import Language, Python
from data.records import Checkpoint, Task, UnitTestsSpec
from harnesses.edits import EditError, Edits, parse_edits, split_steps
from harnesses.sandbox import Limits
from harnesses.workspace import Step, Trial, try_steps
from judges.grader_reach import reaches_for_grader
from judges.rewards import columns_of, completion_text, trainer_task
from judges.score import Score


def checkpoints_of(task: Task) -> list[Checkpoint]:
    """A task's checkpoints: its sequence's, or the one its tests make."""
    spec, workspace = task.verifier, task.workspace
    if spec.checkpoints:
        return list(spec.checkpoints)
    test_patch = workspace.test_patch if workspace else ""
    return [
        Checkpoint(
            test_patch=test_patch, fail_to_pass=spec.fail_to_pass, pass_to_pass=spec.pass_to_pass
        )
    ]


@dataclass
class UnitTests:
    """Scores code attempts for the repositories whose mirrors it knows; at most `parallel`
    sandboxes run at once."""

    mirrors: dict[str, Path]
    limits: Limits
    parallel: int = 1
    language: Language = field(default_factory=Python)

    def __post_init__(self) -> None:
        self._slots = threading.BoundedSemaphore(self.parallel)

    async def grade(self, task: Task, completion: str) -> Score:
        """Score a solver's reply (diffs or whole files; per step for a sequence) to `task`."""
        edits, notes = self._edits(task, completion)
        if all(e is None for e in edits):
            return Score(0.0, "; ".join(notes)[:300])
        tampered = self._reaches_for_grader(task, edits)
        if tampered:
            return Score(0.0, f"tampered: {tampered}"[:300])
        score = await asyncio.to_thread(self.score, task, edits)
        return Score(score.reward, "; ".join([score.why, *notes])[:300])

    def _edits(self, task: Task, reply: str) -> tuple[list[Edits | None], list[str]]:
        """The edits of each step of `reply`, test files set aside, and notes on what was
        unusable or ignored."""
        steps = len(checkpoints_of(task))
        parts = split_steps(reply, steps) if steps > 1 else [reply]
        edits: list[Edits | None] = []
        notes: list[str] = []
        for number, part in enumerate(parts, start=1):
            where = f"step {number}: " if steps > 1 else ""
            try:
                kept, dropped = parse_edits(part).without(self.language.is_test_file)
            except EditError as error:
                edits.append(None)
                notes.append(f"{where}{error}")
                continue
            if dropped:
                notes.append(f"{where}ignored edits to tests: {', '.join(dropped)}")
            edits.append(kept if kept.paths else None)
        return edits, notes

    def _reaches_for_grader(self, task: Task, edits: list[Edits | None]) -> str:
        """Evidence that a step's edits reach for the grader (`judges.grader_reach`), or ""."""
        reference, _ = self._edits(task, task.answer)
        for number, (made, gold) in enumerate(zip(edits, reference, strict=False), start=1):
            evidence = reaches_for_grader(made, gold) if made is not None else ""
            if evidence:
                return f"step {number}: {evidence}" if len(edits) > 1 else evidence
        return ""

    async def self_check(self, task: Task) -> str | None:
        """Why the task's own verifier does not hold (None: the reference patch passes and
        the empty patch fails)."""
        reference, notes = self._edits(task, task.answer)
        if any(e is None for e in reference):
            return f"reference patch unusable: {'; '.join(notes)}"
        gold = await asyncio.to_thread(self.score, task, reference)
        if gold.reward < 1.0:
            return f"reference patch fails: {gold.why}"
        empty = await asyncio.to_thread(self.score, task, [None] * len(reference))
        if empty.reward > 0.0:
            return f"empty patch passes: {empty.why}"
        return None

    def score(self, task: Task, edits: list[Edits | None]) -> Score:
        """Apply each step's `edits` (None: nothing) to the task's workspace, each followed by
        its checkpoint's tests."""
        if task.workspace is None or task.workspace.repo_id not in self.mirrors:
            raise LookupError(f"task {task.task_id}: its repository is not in the lake")
        points = checkpoints_of(task)
        steps = [
            Step(step_edits, point.test_patch, [*point.fail_to_pass, *point.pass_to_pass])
            for step_edits, point in zip(edits, points, strict=True)
        ]
        with self._slots:
            trials = try_steps(
                self.mirrors[task.workspace.repo_id], task.workspace, steps, self.limits
            )
        verdicts = [_verdict(trial, point) for trial, point in zip(trials, points, strict=False)]
        passed = sum(v.reward for v in verdicts)
        if len(points) == 1:
            return verdicts[0]
        why = "; ".join(f"step {i}: {v.why}" for i, v in enumerate(verdicts, start=1))
        if len(verdicts) < len(points):
            why += f"; steps {len(verdicts) + 1}-{len(points)} not taken"
        return Score(passed / len(points), f"{passed:.0f}/{len(points)} checkpoints; {why}")


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


def _verdict(trial: Trial, point: Checkpoint) -> Score:
    if trial.run is None:
        failed = trial.rejected
        why = (failed.stderr or failed.stdout).strip().splitlines()[-1:] if failed else []
        return Score(0.0, f"edits do not apply: {why[0] if why else 'no output'}"[:300])
    if trial.run.tampered:
        return Score(0.0, f"tampered: {trial.run.tampered}"[:300])
    passed = trial.run.passed()
    f2p = sum(t in passed for t in point.fail_to_pass)
    p2p = sum(t in passed for t in point.pass_to_pass)
    f2p_of, p2p_of = len(point.fail_to_pass), len(point.pass_to_pass)
    why = f"fail-to-pass {f2p}/{f2p_of}, pass-to-pass {p2p}/{p2p_of}"
    if trial.run.incomplete:
        why += f" ({trial.run.incomplete})"
    ok = f2p == f2p_of and p2p == p2p_of
    return Score(1.0 if ok else 0.0, why)
