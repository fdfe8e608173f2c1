"""The unit-test verifier of code tasks: an attempt passes when, applied to the task's workspace
in the sandbox, every fail-to-pass test passes and every pass-to-pass test still passes.

Edits to test files are set aside (and named in the reason): the task's tests decide, not the
solver's. The gold self-check asks the same question of the reference patch (must pass) and of
the empty patch (must fail) before a code task is accepted.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from pathlib import Path

from data.languages import Language, Python
from data.records import Task
from harnesses.edits import EditError, Edits, parse_edits, split_diff
from harnesses.sandbox import Limits
from harnesses.workspace import Trial, try_edits
from judges.rewards import Score


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
        """Score a solver's reply (a diff or whole files) to `task`."""
        try:
            edits = parse_edits(completion)
        except EditError as error:
            return Score(0.0, str(error)[:300])
        kept, dropped = edits.without(self.language.is_test_file)
        if not kept.paths:
            return Score(0.0, f"only edits tests: {', '.join(dropped)}"[:300])
        score = await asyncio.to_thread(self.score, task, kept)
        if dropped:
            score = Score(score.reward, f"{score.why}; ignored edits to tests: {dropped}"[:300])
        return score

    async def self_check(self, task: Task) -> str | None:
        """Why the task's own verifier does not hold (None: the reference patch passes and
        the empty patch fails)."""
        gold = await asyncio.to_thread(self.score, task, Edits(diffs=split_diff(task.answer)))
        if gold.reward < 1.0:
            return f"reference patch fails: {gold.why}"
        empty = await asyncio.to_thread(self.score, task, None)
        if empty.reward > 0.0:
            return f"empty patch passes: {empty.why}"
        return None

    def score(self, task: Task, edits: Edits | None) -> Score:
        """Apply `edits` (None: nothing) to the task's workspace and run its tests."""
        if task.workspace is None or task.workspace.repo_id not in self.mirrors:
            raise LookupError(f"task {task.task_id}: its repository is not in the lake")
        spec = task.verifier
        with self._slots:
            trial = try_edits(
                self.mirrors[task.workspace.repo_id],
                task.workspace,
                edits,
                [*spec.fail_to_pass, *spec.pass_to_pass],
                self.limits,
            )
        return _verdict(trial, spec.fail_to_pass, spec.pass_to_pass)


def _verdict(trial: Trial, fail_to_pass: list[str], pass_to_pass: list[str]) -> Score:
    if trial.run is None:
        failed = trial.rejected
        why = (failed.stderr or failed.stdout).strip().splitlines()[-1:] if failed else []
        return Score(0.0, f"edits do not apply: {why[0] if why else 'no output'}"[:300])
    passed = trial.run.passed()
    f2p = sum(t in passed for t in fail_to_pass)
    p2p = sum(t in passed for t in pass_to_pass)
    why = f"fail-to-pass {f2p}/{len(fail_to_pass)}, pass-to-pass {p2p}/{len(pass_to_pass)}"
    if trial.run.completed.timed_out:
        why += " (timed out)"
    ok = f2p == len(fail_to_pass) and p2p == len(pass_to_pass)
    return Score(1.0 if ok else 0.0, why)
