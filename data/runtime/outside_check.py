"""The outside check of a Python code task: a pass rests on values the attempt cannot produce
without doing what the task asks, compared where the attempt cannot reach.

The tests of a task run in one process with the code under test, so everything that process
writes, its outcome records included, could have been written by that code
(`docs/reward-integrity.md`). So the grader also asks the attempt's code for values it can only
compute by behaving like the reference:
- the reference's tests are run once with `record.py`: every call they make into the tree's
  module-level functions, with its arguments and result;
- those calls, and variants of them with one argument nudged (`variants`: inputs no test
  shows, so an attempt cannot hard-code their results), are replayed on the start state and
  on at least two fresh runs of the reference (the admission gate's fresh runs, which also run
  the tests), each time on a copy of the tree without any test file; a call is
  kept where the reference's replays agree with each other and with the record (the behaviour
  is reproducible outside the tests), and the functions whose results differ between start
  and reference are the task's targets: every kept call of a target is the oracle (`Oracle`);
- an attempt's edits are replayed the same way, before the hidden tests are even applied, and
  each result is compared here with the reference's. The expected results never enter a
  sandbox, and the tests that could give them away are not in the tree the calls run in.

Where no call tells start and reference apart, a Python task has no outside check and cannot be
passed; the gold self-check rejects it. Trees of other languages have no oracle yet (None).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from .call_replay import Call, Replayed, Result
from .edits import Edits
from .trial import Step, Trial

TrySteps = Callable[[list[Step]], list[Trial]]
NUMBERS = {"float": float, "decimal": Decimal, "fraction": Fraction}
REL_TOLERANCE = 1e-9
VARIANTS_PER_CALL = 2


@dataclass(frozen=True)
class Oracle:
    """The calls an attempt's code is asked to make and the reference's results, by index."""

    calls: list[Call]
    expected: list[Result]

    def judged(self, replayed: Replayed | None) -> str:
        """Why `replayed` (the attempt's replay of `calls`) fails the check, or "" when each
        result matches the reference's; the reason names functions and counts, never a value."""
        if not self.calls:
            return "no outside check: no call of the tests tells the start from the reference"
        got = replayed.results if replayed else []
        wrong: dict[str, int] = {}
        for number, expected in enumerate(self.expected):
            result = got[number] if number < len(got) else None
            if result is None or not same_result(expected, result):
                name = self.calls[number]["function"]
                wrong[name] = wrong.get(name, 0) + 1
        if not wrong:
            return ""
        parts = ", ".join(f"{name} {count}" for name, count in sorted(wrong.items()))
        return f"outside check: {sum(wrong.values())}/{len(self.calls)} calls differ ({parts})"


@dataclass(frozen=True)
class Probed:
    """The outside check of each checkpoint (None where there is none), and the reference's
    probe runs it was made from: per run, one trial per checkpoint."""

    checks: list[Oracle | None]
    runs: list[list[Trial]]
    recording: list[Trial]  # the run that recorded the tests' calls: one trial per step taken


def oracles(
    reference: Sequence[Edits | None],
    points: Sequence[Any],
    try_steps: TrySteps,
    runs: int = 2,
    run_tests: bool = False,
) -> Probed:
    """The oracle of each checkpoint of a task whose reference edits are `reference` (None
    for a tree that is not Python's); `points` carry each checkpoint's test patch and tests.
    The reference is probed `runs` times (at least 2: a kept call gives the same result in
    each); with `run_tests`, each probe also runs the checkpoint's tests after the calls, so
    the probes are the reference's fresh runs too. A tree whose tests' calls cannot be
    recorded has no oracle and is not probed."""
    recording = [
        Step(edits, p.test_patch, [*p.fail_to_pass, *p.pass_to_pass], record=True)
        for edits, p in zip(reference, points, strict=True)
    ]
    recording_trials = try_steps(recording)
    recorded = [trial.recorded for trial in recording_trials]
    replayable = len(recorded) == len(points) and all(c is not None for c in recorded)
    asked = [_asked(calls or []) for calls in recorded] if replayable else [None] * len(points)

    def probe(before: bool) -> list[Trial]:
        return try_steps(
            [
                Step(
                    edits,
                    p.test_patch,
                    [*p.fail_to_pass, *p.pass_to_pass] if run_tests else [],
                    calls=calls,
                    replay_before=before,
                    run_tests=run_tests,
                )
                for edits, p, calls in zip(reference, points, asked, strict=True)
            ]
        )

    if not replayable:
        return Probed([None] * len(points), [], recording_trials)
    made = [probe(before=number == 0) for number in range(max(runs, 2))]
    checks: list[Oracle | None] = [
        _oracle(calls or [], questions or [], [run[index] for run in made if index < len(run)])
        for index, (calls, questions) in enumerate(zip(recorded, asked, strict=True))
    ]
    return Probed(checks, made, recording_trials)


def _asked(recorded: list[Call]) -> list[Call]:
    """The calls the probes make: the recorded ones, then their variants."""
    inputs = [{k: call[k] for k in ("module", "function", "args", "kwargs")} for call in recorded]
    return inputs + [variant for call in inputs for variant in variants(call)]


def variants(call: Call) -> list[Call]:
    """Up to VARIANTS_PER_CALL copies of `call`, each with one positional argument nudged (a
    number plus one, a string's last digit turned): results only the reference can give."""
    args = call["args"].get("tuple", []) if isinstance(call["args"], dict) else []
    made = []
    for number, arg in enumerate(args):
        nudged = _nudged(arg)
        if nudged is not None and len(made) < VARIANTS_PER_CALL:
            changed = [*args[:number], nudged, *args[number + 1 :]]
            made.append({**call, "args": {"tuple": changed}})
    return made


def _nudged(form: object) -> object:
    if type(form) is int:
        return form + 1
    if isinstance(form, str):
        digits = [i for i, c in enumerate(form) if c in "0123456789"]
        if not digits:
            return None
        at = digits[-1]
        return form[:at] + str((int(form[at]) + 1) % 10) + form[at + 1 :]
    if isinstance(form, dict) and set(form) == {"decimal"}:
        return {"decimal": str(Decimal(form["decimal"]) + 1)}
    if isinstance(form, dict) and set(form) == {"float"}:
        return {"float": repr(float(form["float"]) + 1.0)}
    return None


def _oracle(recorded: list[Call], asked: list[Call], probes: list[Trial]) -> Oracle:
    """The oracle from a checkpoint's probe trials (the first replayed the start as well)."""
    if len(probes) < 2:
        return Oracle([], [])  # a probe's edits did not apply: nothing is reproducible
    before = _results(probes[0].replayed_before)
    results = [_results(trial.replayed) for trial in probes]
    stable, targets = [], set()
    for number, call in enumerate(asked):
        result = _at(results[0], number)
        repeats = [_at(other, number) for other in results[1:]]
        if result is None or any(r is None or not same_result(result, r) for r in repeats):
            continue  # the reference's behaviour is not reproducible
        if number < len(recorded) and not same_result(_result_of(recorded[number]), result):
            continue  # the behaviour depends on the test run: it cannot be asked outside it
        returned = result.get("returns")
        if isinstance(returned, dict) and "opaque" in returned:
            continue  # nothing to compare but a class, which any attempt could name
        stable.append(number)
        start = _at(before, number)
        if start is None or not same_result(result, start):
            targets.add(call["function"])
    kept = [n for n in stable if asked[n]["function"] in targets]
    return Oracle([asked[n] for n in kept], [results[0][n] for n in kept])  # type: ignore[misc]


def _results(replayed: Replayed | None) -> list[Result | None]:
    return replayed.results if replayed else []


def _at(results: list[Result | None], number: int) -> Result | None:
    return results[number] if number < len(results) else None


def _result_of(call: Call) -> Result:
    return {k: call[k] for k in ("returns", "raises", "missing") if k in call}


def same_result(expected: Result, got: Result) -> bool:
    """Whether `got` matches the reference's `expected`: the same value (`same_value`), or an
    exception of the same class or a subclass of it."""
    if "raises" in expected:
        classes, first = got.get("raises"), expected["raises"][:1]
        return isinstance(classes, list) and bool(first) and first[0] in classes
    if "returns" in expected:
        return "returns" in got and same_value(expected["returns"], got["returns"])
    return False  # the reference had no such function: nothing can match it


def same_value(a: object, b: object) -> bool:
    """Equality of two encoded values (`pytest_boot/values.py`): numbers of any kind by value
    (floats within a relative 1e-9), lists and tuples alike, dicts and sets regardless of
    order, objects by class and state."""
    if isinstance(a, dict) and isinstance(b, dict):
        x, y = _number(a), _number(b)
        if x is not None and y is not None:
            return _close(x, y)
        return _same_form(a, b)
    if type(a) is bool or type(b) is bool:
        return a is b
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        return _close(x, y)
    return a == b


def _same_form(a: dict, b: dict) -> bool:
    for tag in ("list", "tuple"):
        if tag in a:
            items = b.get("list", b.get("tuple"))
            return isinstance(items, list) and _same_items(a[tag], items)
    if "dict" in a:
        return "dict" in b and _same_unordered(a["dict"], b["dict"])
    if "set" in a:
        return "set" in b and _same_unordered(a["set"], b["set"])
    for tag, state in (("dataclass", "fields"), ("namedtuple", "items"), ("object", "state")):
        if tag in a:
            return b.get(tag) == a[tag] and same_value(a.get(state), b.get(state))
    return a == b


def _same_items(a: list, b: list) -> bool:
    return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))


def _same_unordered(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    left = list(b)
    for item in a:
        match = next((i for i, other in enumerate(left) if same_value(item, other)), None)
        if match is None:
            return False
        left.pop(match)
    return True


def _number(form: object) -> int | float | Decimal | Fraction | None:
    if type(form) is int:
        return form
    if isinstance(form, dict) and len(form) == 1:
        tag, text = next(iter(form.items()))
        if tag in NUMBERS and isinstance(text, str):
            try:
                return NUMBERS[tag](text)
            except (ValueError, ArithmeticError):
                return None
    return None


def _close(x: int | float | Decimal | Fraction, y: int | float | Decimal | Fraction) -> bool:
    if isinstance(x, float) or isinstance(y, float):
        fx, fy = float(x), float(y)
        if math.isnan(fx) or math.isnan(fy):
            return math.isnan(fx) and math.isnan(fy)
        return math.isclose(fx, fy, rel_tol=REL_TOLERANCE, abs_tol=1e-12)
    return x == y
