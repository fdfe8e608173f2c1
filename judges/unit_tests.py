"""The unit-test verifier of code tasks: an attempt passes when, applied to the task's workspace
in the sandbox, every fail-to-pass test passes and every pass-to-pass test still passes.

A commit sequence has a checkpoint per step: the attempt's `## Step N` edits are applied in
order, each followed by its step's tests, and the reward is the share of checkpoints passed.
Edits to test files are set aside (and named in the reason): the task's tests decide, not the
solver's. Edits whose added code reaches for the grader (`data.runtime.grader_reach`) score 0 as
`tampered` before anything runs. The gold self-check asks the same question of the reference
patch (must pass) and of the empty patch (must fail) before a code task is accepted.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from data.lake import Gate, GateName, Task, content_id
from data.runtime import code_grading
from data.runtime.call_replay import ReplayError
from data.runtime.code_grading import Graded
from data.runtime.edits import Edits
from data.runtime.errors import NoVerdict
from data.runtime.languages import of_path
from data.runtime.outside_check import Oracle, oracles
from data.runtime.sandbox import Limits
from data.runtime.trial import Step, Trial
from harnesses.workspace import copies_of, files_around_last, files_at_start, try_steps
from judges.redteam.grading import as_first_step, attacked
from judges.redteam.suites import admission_attacks_for
from judges.rewards import columns_of, completion_text, trainer_task
from judges.score import NoScore, Score, verdict
from judges.verifier_types import verifier_type


def checkpoints_of(task: Task) -> list[code_grading.Point]:
    """A task's checkpoints: its sequence's, or the one its tests make."""
    test_patch = task.workspace.test_patch if task.workspace else ""
    return code_grading.points_of(task.verifier.model_dump(), test_patch)


FRESH_RUNS = 3  # the reference must pass on each: a flaky task is not admitted
MUTANTS = 3  # mutants of the reference its tests are tried on: killing none keeps a task out
MUTANT_WALL_S = 60.0  # a mutant's run past this is killed: its tests did not pass
Mutate = Callable[[dict[str, str], dict[str, str], int], list[dict[str, str]]]


@dataclass(frozen=True)
class GateFailure:
    """Why a code task is not admitted: the gate it failed (the funnel's reason) and what was
    seen."""

    reason: str
    detail: str

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


@dataclass
class Admission:
    """The admission gates a code task went through, in order (`Gate` records); where one
    failed, it is the last and `failure` says why the task is kept out."""

    task_id: str
    gates: list[Gate] = field(default_factory=list)
    failure: GateFailure | None = None

    def passed(self, gate: GateName, detail: str, share: float | None = None) -> None:
        self._add(gate, True, detail, share)

    def failed(
        self, gate: GateName, reason: str, detail: str, share: float | None = None
    ) -> Admission:
        """Record `gate` as failed, for `reason` (the funnel's), and end the admission."""
        self._add(gate, False, detail, share)
        self.failure = GateFailure(reason, detail)
        return self

    def not_run(self, gate: GateName, reason: str, detail: str) -> Admission:
        """Record `gate` as one that could not run, and end the admission: a task is admitted
        only past gates that ran."""
        self._add(gate, False, detail, None, ran=False)
        self.failure = GateFailure(reason, detail)
        return self

    def _add(
        self, gate: GateName, passed: bool, detail: str, share: float | None, ran: bool = True
    ) -> None:
        self.gates.append(
            Gate(
                task_id=self.task_id, gate=gate, passed=passed, detail=detail, share=share, ran=ran
            )
        )

    def of(self, task_id: str) -> Admission:
        """The same gates and outcome, for the task `task_id`."""
        gates = [gate.model_copy(update={"task_id": task_id}) for gate in self.gates]
        return Admission(task_id, gates, self.failure)

    @property
    def summary(self) -> str:
        """What the gates found, in one line (the verify stage's detail)."""
        if self.failure is not None:
            return str(self.failure)
        return "; ".join(gate.detail for gate in self.gates)


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
        self._admissions: dict[str, Admission] = {}

    async def grade(self, task: Task, completion: str) -> Score:
        """Score a solver's reply (diffs or whole files; per step for a sequence) to `task`.
        Raises `NoVerdict` where the grader could not judge it (`code_grading`)."""

        def graded() -> Graded:
            points, trier = checkpoints_of(task), self.trier(task)
            return code_grading.grade(completion, task.answer, points, trier, self.checks(task))

        return Score(*await asyncio.to_thread(graded))

    def checks(self, task: Task) -> list[Oracle | None]:
        """The task's outside checks (`data.runtime.outside_check`), made once per reference, tests
        and workspace: two sandbox runs of its reference."""
        key = graded_alike(task)
        if key not in self._checks:
            made = code_grading.outside_checks(task.answer, checkpoints_of(task), self.trier(task))
            self._checks.setdefault(key, made)
        return self._checks[key]

    def fresh_runs(
        self, task: Task, reference: list[Edits | None]
    ) -> tuple[list[Oracle | None], list[Score]]:
        """The task's outside checks and the scores of the FRESH_RUNS fresh runs of its
        `reference` they were made from (each replays the calls, then runs the tests): one
        failed run where the reference does not apply, none where there is no outside check
        (nothing was probed)."""
        points = checkpoints_of(task)
        probed = oracles(reference, points, self.trier(task), runs=FRESH_RUNS, run_tests=True)
        key = graded_alike(task)
        self._checks.setdefault(key, probed.checks)
        untested = [None] * len(points)  # a fresh run is judged by its tests
        runs = [Score(*code_grading.scored(run, points, untested)) for run in probed.runs]
        recording = probed.recording
        if len(recording) < len(points) or any(t.rejected is not None for t in recording):
            runs = [Score(*code_grading.scored(recording, points, untested))]  # does not apply
        return self._checks[key], runs

    async def self_check(self, task: Task, mutate: Mutate) -> Admission:
        """`task`'s admission (`admit`), taken once per reference, tests and workspace: a
        variant that differs from a task already admitted only in its prompt (the repair
        loop's `with_tests`, `output_shown`) is graded alike, so it gets the same gates."""
        key = graded_alike(task)
        if key not in self._admissions:
            self._admissions[key] = await self.admit(task, mutate)
        return self._admissions[key].of(task.task_id)

    async def admit(self, task: Task, mutate: Mutate) -> Admission:
        """Put `task` through the admission gates, stopping at the first it fails: its
        reference is usable and passes FRESH_RUNS fresh runs; it has an outside check; the
        empty attempt and a do-nothing attempt (the start's files given back with a comment
        added) score 0; its tests kill at least one of MUTANTS mutants of the
        reference (`mutate`: before, after, how many -> mutated files); the red team's
        admission attacks score 0."""
        admission = Admission(task.task_id)
        points = checkpoints_of(task)
        reference, notes = code_grading.edits_of(task.answer, len(points))
        if any(e is None for e in reference):
            return admission.failed("reference", "reference_unusable", "; ".join(notes))
        admission.passed("reference", f"reference usable: {len(reference)} step(s)")
        try:
            checks, golds = await asyncio.to_thread(self.fresh_runs, task, reference)
        except ReplayError as error:
            return admission.failed("outside_check", "no_outside_check", str(error))
        failed = [gold.why for gold in golds if gold.reward < 1.0]
        share = 1 - len(failed) / len(golds) if golds else None
        if golds and len(failed) == len(golds):
            return admission.failed("fresh_runs", "reference_fails", failed[0], share)
        if failed:
            detail = f"{len(golds) - len(failed)} of {len(golds)} runs: {failed[0]}"
            return admission.failed("fresh_runs", "reference_flaky", detail, share)
        if any(check is None for check in checks):
            why = "its tests' calls could not be recorded: nothing outside the test process"
            why += " checks an attempt, so its records could be forged"
            return admission.failed("outside_check", "no_outside_check", why)
        admission.passed("fresh_runs", f"reference passed {len(golds)} fresh runs", share)
        unchecked = next((c.judged(None) for c in checks if c is not None and not c.calls), "")
        if unchecked:
            return admission.failed(
                "outside_check", "no_outside_check", unchecked.partition(": ")[2]
            )
        calls = sum(len(c.calls) for c in checks if c is not None)
        unseen = [c.unseen for c in checks if c is not None]
        if not all(unseen):
            why = f"its {calls} calls are all inputs the tests show: a table of their values"
            return admission.failed("outside_check", "no_unseen_input", why + " would pass")
        detail = f"outside check: {calls} calls, {sum(unseen)} on inputs no test shows"
        admission.passed("outside_check", detail)
        copies = await asyncio.to_thread(self.copies_elsewhere, task, checks)
        if copies:
            why = f"the environment holds a copy of the target's module: {copies}"
            return admission.failed("no_other_copy", "copy_in_environment", why)
        admission.passed("no_other_copy", "no copy of the target's modules in the environment")
        empty = await asyncio.to_thread(self.score, task, [None] * len(reference))
        if empty.reward > 0.0:
            return admission.failed("empty_attempt", "empty_attempt_passes", empty.why)
        admission.passed("empty_attempt", "the empty attempt scored 0")
        files, tests = await asyncio.to_thread(self._start, task, reference)
        idle = await asyncio.to_thread(self.score, task, do_nothing(files, len(reference)))
        if idle.reward > 0.0:
            return admission.failed("do_nothing", "do_nothing_passes", idle.why)
        admission.passed("do_nothing", "a do-nothing attempt scored 0")
        killed, tried = await asyncio.to_thread(self.mutants_killed, task, reference, mutate)
        if not tried:
            why = "no mutant of the reference to try: the tests' strength is unmeasured"
            return admission.not_run("mutants", "no_mutant_to_try", why)
        if not killed:
            detail = f"its tests killed 0 of {tried} mutants of the reference"
            return admission.failed("mutants", "tests_kill_no_mutant", detail, 0.0)
        admission.passed("mutants", f"tests killed {killed} of {tried} mutants", killed / tried)
        paid, unrun, tried = await asyncio.to_thread(self._red_team, task, files, checks)
        if paid:
            return admission.failed("red_team", "red_team_scores", paid)
        if unrun:
            why = f"not shown to have run: {unrun}"
            return admission.not_run("red_team", "red_team_not_run", why)
        admission.passed("red_team", f"{tried} red-team attacks ran and scored 0")
        return admission

    def mutants_killed(
        self, task: Task, reference: list[Edits | None], mutate: Mutate
    ) -> tuple[int, int]:
        """(killed, tried): of up to MUTANTS mutants of the reference's last step (`mutate`),
        those its tests alone fail (the outside check left out: it is the tests' strength that
        is measured)."""
        assert task.workspace is not None and all(e is not None for e in reference)
        mirror = self.mirrors[task.workspace.repo_id]
        steps = [e for e in reference if e is not None]
        before, after = files_around_last(mirror, task.workspace, steps, self.limits)
        # a mutant that loops for ever is killed at MUTANT_WALL_S, not at the verifier's limit
        capped = replace(self.limits, wall_s=min(self.limits.wall_s, MUTANT_WALL_S))
        points, trier = checkpoints_of(task), self.trier(task, capped)
        killed, mutants = 0, mutate(before, after, MUTANTS)
        for files in mutants:
            attempt: list[Edits | None] = [*steps[:-1], Edits(files=files)]
            reward, _ = code_grading.score_edits(attempt, points, trier, [None] * len(points))
            killed += reward < 1.0
        return killed, len(mutants)

    def copies_elsewhere(self, task: Task, checks: list[Oracle | None]) -> str:
        """Where the test environment holds another copy of a module the outside check calls
        into (`TestSuite.copies_in`), or ""."""
        assert task.workspace is not None  # a code task carries its workspace
        modules = sorted({call["module"] for c in checks if c is not None for call in c.calls})
        found = copies_of(self.mirrors[task.workspace.repo_id], task.workspace, modules)
        return ", ".join(found[:3])

    def _start(self, task: Task, reference: list[Edits | None]) -> tuple[dict, dict]:
        """The files of the reference's first step as an attempt starts from them, and the
        start's test files."""
        assert task.workspace is not None and reference[0] is not None  # checked by the caller
        mirror = self.mirrors[task.workspace.repo_id]
        return files_at_start(mirror, task.workspace, sorted(reference[0].paths), self.limits)

    def _red_team(
        self, task: Task, files: dict[str, str], checks: list[Oracle | None]
    ) -> tuple[str, str, int]:
        """The red team's admission attacks on a task, in its language (made as a sequence's
        first step): the first that scored and why (or ""), those not seen to run (or ""), and
        how many were tried."""
        check = checks[0]
        if check is None:
            return "", "no outside check to attack", 0
        points, trier = checkpoints_of(task), self.trier(task)
        unrun, attacks = [], admission_attacks_for(files, check.shown)
        for attack in attacks:
            if len(points) > 1:
                attack = as_first_step(attack)
            got = attacked(attack, files, task.answer, points, trier, checks, until_decided=True)
            if got.reward > 0.0:
                return f"{attack.name}: {got.why}", "", len(attacks)
            if not got.ran:
                unrun.append(attack.name)
        return "", "; ".join(unrun), len(attacks)

    def score(self, task: Task, edits: list[Edits | None]) -> Score:
        """Apply each step's `edits` (None: nothing) to the task's workspace, each followed by
        its outside check and, where that does not already score it 0, its checkpoint's tests
        (a gate that must see 0 runs only the tests that could pay)."""
        points, trier, checks = checkpoints_of(task), self.trier(task), self.checks(task)
        return Score(*code_grading.score_edits(edits, points, trier, checks, until_decided=True))

    def trier(self, task: Task, limits: Limits | None = None) -> code_grading.TrySteps:
        """Steps tried on `task`'s workspace rebuilt from its mirror, a sandbox slot held,
        under `limits` (default: the verifier's)."""

        def tried(steps: list[Step]) -> list[Trial]:
            workspace = task.workspace
            if workspace is None or workspace.repo_id not in self.mirrors:
                detail = f"task {task.task_id}: its repository is not in the lake"
                raise NoVerdict("repository_not_mirrored", detail)
            with self._slots:
                mirror = self.mirrors[workspace.repo_id]
                return try_steps(mirror, workspace, steps, limits or self.limits)

        return tried


def graded_alike(task: Task) -> str:
    """What a code task's grading depends on: its reference, its tests and its workspace."""
    return content_id(task.answer, task.verifier.model_dump(), task.workspace)


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
    tasks whose repository `unit_tests` has no mirror of, and completions the grader could not
    judge (no verdict: the sandbox did not start, the machine too slow to run the reference in
    time), get None."""

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
            if not verifier_type(spec).sandboxed or not room:
                return None
            task = trainer_task(prompt, gold, spec, task_kind, room)
            if task.workspace is None or task.workspace.repo_id not in unit_tests.mirrors:
                return None
            graded = await verdict(unit_tests.grade(task, completion_text(completion)))
            return None if isinstance(graded, NoScore) else graded.reward

        async def run() -> list[float | None]:
            batch = zip(prompts, completions, specs, golds, workspace, kind, strict=True)
            return list(await asyncio.gather(*(one(row) for row in batch)))

        return asyncio.run(run())

    return reward
