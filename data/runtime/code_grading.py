"""How a code attempt is graded: its reply's edits per step (test files set aside), the
tripwire for code that reaches for the grader, then each step's edits tried with its
checkpoint's tests, every fail-to-pass test passing and every pass-to-pass test still passing,
and, for Python trees, the outside check (`data.runtime.outside_check`): the calls the tests make
into the functions the task changes, replayed on the attempt without the tests, must return
what the reference returns.

Where the steps are tried is the caller's (`TrySteps`): taskfoundry rebuilds the workspace
from its repository mirror (`judges.unit_tests`), an exported package from the tree it ships.
Both grade through `grade` and `score_edits`, so a completion scores the same in each; this
module stands alone in an exported package.

What is the attempt's and what is the grader's (docs/reward-integrity.md, "No verdict"): the
attempt's code runs only in the sandbox's processes, which hand back output, never exceptions,
so an exception out of trying the steps is the grader's own machinery failing (the sandbox did
not start, the workspace or the test environment could not be made) and raises `NoVerdict`.
A run cut off at its time limit is the attempt's (an endless loop scores 0) unless the
reference, run the same way just after, is cut off too: then the machine, not the attempt, is
too slow, and there is no verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .call_replay import Replayed
from .edits import EditError, Edits, parse_edits, split_steps
from .errors import NoVerdict, ReasonedError
from .grader_reach import reaches_for_grader
from .languages import is_any_test_file
from .outside_check import Oracle, oracles
from .trial import Step, Trial

TrySteps = Callable[[list[Step]], list[Trial]]  # the steps tried on a fresh workspace, in order
Graded = tuple[float, str]  # a reward and why
WHY_CHARS = 300
# what the grader's own steps raise when they fail: the sandbox that cannot be made
# (`SandboxUnavailable`), a workspace or test environment that cannot be built (`GitError`,
# `WorkspaceError`, `EnvError`), no free sandbox uid, a file system or process that fails
GRADER_FAILURES = (ReasonedError, RuntimeError, OSError)


@dataclass(frozen=True)
class Point:
    """A checkpoint: the hidden test patch applied after a step, and the tests that must then
    pass (`points_of` reads them from a verifier spec's JSON form)."""

    test_patch: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]


def points_of(spec: Mapping[str, Any], test_patch: str) -> list[Point]:
    """The checkpoints of a `unit_tests` verifier `spec`: its sequence's, or the one its
    fail-to-pass and pass-to-pass tests make after the workspace's `test_patch`."""
    if spec.get("checkpoints"):
        return [
            Point(p["test_patch"], list(p["fail_to_pass"]), list(p["pass_to_pass"]))
            for p in spec["checkpoints"]
        ]
    fail, keep = list(spec.get("fail_to_pass") or []), list(spec.get("pass_to_pass") or [])
    return [Point(test_patch, fail, keep)]


def grade(
    reply: str,
    reference: str,
    points: Sequence[Point],
    try_steps: TrySteps,
    checks: Sequence[Oracle | None],
    until_decided: bool = False,
) -> Graded:
    """Score a solver's `reply` (diffs or whole files; `## Step N` parts for a sequence) to a
    task with checkpoints `points`, reference change `reference` and outside checks `checks`
    (`outside_checks`); `until_decided` as for `score_edits`. Raises `NoVerdict` where the grader
    could not judge it (the module's docstring says when)."""
    edits, notes = edits_of(reply, len(points))
    if all(e is None for e in edits):
        return 0.0, "; ".join(notes)[:WHY_CHARS]
    gold = edits_of(reference, len(points))[0]
    tampered = grader_reach(edits, gold)
    if tampered:
        return 0.0, f"tampered: {tampered}"[:WHY_CHARS]
    trials = take_steps(edits, points, try_steps, checks, until_decided)
    reward, why = scored(trials, points, checks)
    stopped = cut_off(trials)
    if stopped and reward < 1.0:
        also = cut_off(take_steps(gold, points, try_steps, checks))
        if also:
            why = f"{stopped} hit the time limit, and so did the reference's ({also})"
            raise NoVerdict("grader_timeout", why)
        why += f"; {stopped} hit the time limit (the reference's kept within it)"
    return reward, "; ".join([why, *notes])[:WHY_CHARS]


def outside_checks(
    reference: str, points: Sequence[Point], try_steps: TrySteps
) -> list[Oracle | None]:
    """Each checkpoint's outside check (`data.runtime.outside_check`), from the reference change;
    none where the reference is unusable or the tests' calls cannot be recorded."""
    edits, _ = edits_of(reference, len(points))
    if any(e is None for e in edits):
        return [None] * len(points)
    return oracles(edits, points, guarded(try_steps)).checks


def guarded(try_steps: TrySteps) -> TrySteps:
    """`try_steps`, a failure of the grader's own machinery raised as `NoVerdict` (its reason,
    where it has one: `sandbox_unavailable`; else `grader_failed`, naming the exception)."""

    def tried(steps: list[Step]) -> list[Trial]:
        try:
            return try_steps(steps)
        except NoVerdict:
            raise
        except GRADER_FAILURES as error:
            if isinstance(error, ReasonedError):
                raise NoVerdict(error.reason, error.detail[:WHY_CHARS]) from error
            detail = f"{type(error).__name__}: {error}"[:WHY_CHARS]
            raise NoVerdict("grader_failed", detail) from error

    return tried


def edits_of(reply: str, steps: int) -> tuple[list[Edits | None], list[str]]:
    """The edits of each step of `reply`, test files (of any language taskfoundry reads) set
    aside, and notes on what was unusable or ignored."""
    parts = split_steps(reply, steps) if steps > 1 else [reply]
    edits: list[Edits | None] = []
    notes: list[str] = []
    for number, part in enumerate(parts, start=1):
        where = f"step {number}: " if steps > 1 else ""
        try:
            kept, dropped = parse_edits(part).without(is_any_test_file)
        except EditError as error:
            edits.append(None)
            notes.append(f"{where}{error}")
            continue
        if dropped:
            notes.append(f"{where}ignored edits to tests: {', '.join(dropped)}")
        edits.append(kept if kept.paths else None)
    return edits, notes


def grader_reach(edits: list[Edits | None], reference: list[Edits | None]) -> str:
    """Evidence that a step's edits reach for the grader (`data.runtime.grader_reach`), or ""."""
    for number, (made, gold) in enumerate(zip(edits, reference, strict=False), start=1):
        evidence = reaches_for_grader(made, gold) if made is not None else ""
        if evidence:
            return f"step {number}: {evidence}" if len(edits) > 1 else evidence
    return ""


def score_edits(
    edits: list[Edits | None],
    points: Sequence[Point],
    try_steps: TrySteps,
    checks: Sequence[Oracle | None],
    until_decided: bool = False,
) -> Graded:
    """Try each step's `edits` (None: nothing), each followed by its outside check's calls and
    its checkpoint's tests; a sequence scores the share of checkpoints passed. With
    `until_decided`, a step whose replay fails its outside check runs no test, and the steps
    after it are not taken: its reward is 0 whatever the tests say (what a gate that must see
    0 asks; the reason then has no test counts)."""
    return scored(take_steps(edits, points, try_steps, checks, until_decided), points, checks)


def take_steps(
    edits: list[Edits | None],
    points: Sequence[Point],
    try_steps: TrySteps,
    checks: Sequence[Oracle | None],
    until_decided: bool = False,
) -> list[Trial]:
    """The trials of each step's `edits`, as `score_edits` takes them (`guarded`)."""
    steps = [
        Step(
            step_edits,
            point.test_patch,
            [*point.fail_to_pass, *point.pass_to_pass],
            calls=check.calls if check else None,
            decided=_fails(check) if until_decided and check is not None else None,
        )
        for step_edits, point, check in zip(edits, points, checks, strict=True)
    ]
    return guarded(try_steps)(steps)


def cut_off(trials: list[Trial]) -> str:
    """What of `trials` was stopped at its time limit, or "": applying the edits, the replay of
    the outside check's calls or the test run."""
    for number, trial in enumerate(trials, start=1):
        where = f"step {number}'s " if len(trials) > 1 else "the "
        if trial.rejected is not None and trial.rejected.timed_out:
            return f"{where}applying the edits"
        if trial.replayed is not None and trial.replayed.timed_out:
            return f"{where}replay of the outside check's calls"
        if trial.run is not None and trial.run.completed.timed_out:
            return f"{where}test run"
    return ""


def _fails(check: Oracle) -> Callable[[Replayed | None], bool]:
    return lambda replayed: bool(check.judged(replayed))


def scored(trials: list[Trial], points: Sequence[Point], checks: Sequence[Oracle | None]) -> Graded:
    """The reward and why of an attempt's `trials` (one per step taken): each checkpoint's
    `verdict`; a sequence scores the share of checkpoints passed."""
    verdicts = [
        verdict(trial, point, check)
        for trial, point, check in zip(trials, points, checks, strict=False)
    ]
    if len(points) == 1:
        return verdicts[0]
    passed = sum(reward for reward, _ in verdicts)
    why = "; ".join(f"step {i}: {v}" for i, (_, v) in enumerate(verdicts, start=1))
    if len(verdicts) < len(points):
        why += f"; steps {len(verdicts) + 1}-{len(points)} not taken"
    return passed / len(points), f"{passed:.0f}/{len(points)} checkpoints; {why}"


def verdict(trial: Trial, point: Point, check: Oracle | None) -> Graded:
    """One step's outcome: 1.0 when its edits applied, every test of `point` passed and the
    outside check (None: there is none, its calls not recorded) found every result the
    reference's."""
    if trial.run is None and trial.rejected is None and check is not None:
        return 0.0, f"{check.judged(trial.replayed)} (no test run)"  # decided by the replay
    if trial.run is None:
        failed = trial.rejected
        why = (failed.stderr or failed.stdout).strip().splitlines()[-1:] if failed else []
        return 0.0, f"edits do not apply: {why[0] if why else 'no output'}"[:WHY_CHARS]
    if trial.run.tampered:
        return 0.0, f"tampered: {trial.run.tampered}"[:WHY_CHARS]
    passed = trial.run.passed()
    f2p = sum(t in passed for t in point.fail_to_pass)
    p2p = sum(t in passed for t in point.pass_to_pass)
    f2p_of, p2p_of = len(point.fail_to_pass), len(point.pass_to_pass)
    why = f"fail-to-pass {f2p}/{f2p_of}, pass-to-pass {p2p}/{p2p_of}"
    if trial.run.incomplete:
        why += f" ({trial.run.incomplete})"
    ok = f2p == f2p_of and p2p == p2p_of
    outside = check.judged(trial.replayed) if check is not None else ""
    if outside:
        return 0.0, f"{why}; {outside}"
    return 1.0 if ok else 0.0, why
