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

The same holds for JavaScript and TypeScript trees (`data.runtime.node_calls`): the calls are
those the test files make into the functions the tree's modules export, in the same JSON forms.
Where no call tells start and reference apart, a task has no outside check and cannot be
passed; the gold self-check rejects it.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
    """The calls an attempt's code is asked to make and the reference's results, by index,
    and the calls of its target functions the tests make, as recorded (inputs and results: what
    a solver shown the tests could hard-code)."""

    calls: list[Call]
    expected: list[Result]
    shown: list[Call] = field(default_factory=list)
    unseen: int = 0  # calls on inputs no test shows where the start and the reference differ

    def judged(self, replayed: Replayed | None) -> str:
        """Why `replayed` (the attempt's replay of `calls`) fails the check, or "" when each
        result matches the reference's; the reason names functions and counts, never a value."""
        if not self.calls:
            return "no outside check: no call of the tests tells the start from the reference"
        if replayed is not None and replayed.tampered:
            return f"outside check: tampered: {replayed.tampered}"
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
    where the tree's calls cannot be recorded); `points` carry each checkpoint's test patch
    and tests. The reference is probed `runs` times (at least 2: a kept call gives the same
    result in each); with `run_tests`, each probe also runs the checkpoint's tests after the
    calls, so the probes are the reference's fresh runs too. A tree whose tests' calls cannot be
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
    """Copies of `call` with inputs no test shows, whose results only the reference can give:
    up to VARIANTS_PER_CALL with one argument, positional or keyword, nudged (`nudged`), and
    one with every argument nudged at once, which keeps what relates them (a string and the
    same string in a set are turned alike)."""
    args = call["args"].get("tuple", []) if isinstance(call["args"], dict) else []
    pairs = call["kwargs"].get("dict", []) if isinstance(call["kwargs"], dict) else []
    names = [name for name, _ in pairs]
    values = [*args, *(value for _, value in pairs)]  # positional, then keyword
    changes = [nudged(value) for value in values]

    def variant(changed: list) -> Call:
        positional, keyword = changed[: len(args)], changed[len(args) :]
        return {**call, "args": {"tuple": positional}, "kwargs": {"dict": _pairs(names, keyword)}}

    made = [
        variant([*values[:at], change, *values[at + 1 :]])
        for at, change in enumerate(changes)
        if change is not None
    ][:VARIANTS_PER_CALL]
    if sum(change is not None for change in changes) > 1:
        made.append(variant([v if c is None else c for v, c in zip(values, changes, strict=True)]))
    return made


def _pairs(names: list, values: list) -> list[list]:
    return [[name, value] for name, value in zip(names, values, strict=True)]


def nudged(form: object) -> object:
    """The encoded value `form` (`pytest_boot/values.py`, `node_boot/values.mjs`) changed a
    little, or None where it has nothing to change: a number (a bigint too) plus one; a
    string's or bytes' last digit, letter or byte turned; a date, time or duration a day (a
    minute) on; in a list, tuple, set, dict, map, named tuple or dataclass, the last item
    (value, field) that can be nudged, nudged."""
    if type(form) is int:
        return form + 1
    if isinstance(form, str):
        return _turned(form)
    if not isinstance(form, dict):
        return None
    for tag, change in _NUDGES.items():
        if tag in form:
            return change(form)
    return None


def _turned(text: str) -> str | None:
    """`text` with its last digit or letter turned to the next (9 to 0, z to a), or None."""
    for at in range(len(text) - 1, -1, -1):
        char = text[at]
        if char.isascii() and char.isalnum():
            ring = "0123456789" if char.isdigit() else "abcdefghijklmnopqrstuvwxyz"
            turned = ring[(ring.index(char.lower()) + 1) % len(ring)]
            return text[:at] + (turned.upper() if char.isupper() else turned) + text[at + 1 :]
    return None


def _bytes_turned(form: dict) -> dict | None:
    data = bytes.fromhex(form["bytes"])
    if not data:
        return None
    return {"bytes": (data[:-1] + bytes([(data[-1] + 1) % 256])).hex()}


def _later(form: dict) -> dict:
    if "datetime" in form:
        moved = datetime.datetime.fromisoformat(form["datetime"]) + datetime.timedelta(days=1)
        return {"datetime": moved.isoformat()}
    if "date" in form:
        moved_day = datetime.date.fromisoformat(form["date"]) + datetime.timedelta(days=1)
        return {"date": moved_day.isoformat()}
    at = datetime.time.fromisoformat(form["time"])
    return {"time": at.replace(minute=(at.minute + 1) % 60).isoformat()}


def _last_nudged(items: list) -> list | None:
    """`items` with the last one that can be nudged nudged, or None."""
    for at in range(len(items) - 1, -1, -1):
        changed = nudged(items[at])
        if changed is not None:
            return [*items[:at], changed, *items[at + 1 :]]
    return None


def _in_sequence(form: dict) -> dict | None:
    tag = "list" if "list" in form else "tuple"
    items = _last_nudged(form[tag])
    return None if items is None else {tag: items}


def _in_set(form: dict) -> dict | None:
    for at in range(len(form["set"]) - 1, -1, -1):
        changed = nudged(form["set"][at])
        if changed is not None and all(not same_value(changed, item) for item in form["set"]):
            items = [*form["set"][:at], changed, *form["set"][at + 1 :]]
            return {**form, "set": items}
    return None


def _in_dict(form: dict) -> dict | None:
    tag = "dict" if "dict" in form else "map"
    keys = [key for key, _ in form[tag]]
    values = _last_nudged([value for _, value in form[tag]])
    return None if values is None else {tag: _pairs(keys, values)}


def _in_fields(form: dict) -> dict | None:
    values = _last_nudged(list(form["fields"].values()))
    return (
        None
        if values is None
        else {**form, "fields": dict(zip(form["fields"], values, strict=True))}
    )


def _in_items(form: dict) -> dict | None:
    items = nudged(form["items"])
    return None if items is None else {**form, "items": items}


_NUDGES: dict[str, Callable[[dict], dict | None]] = {
    "float": lambda f: {"float": repr(float(f["float"]) + 1.0)},
    "decimal": lambda f: {"decimal": str(Decimal(f["decimal"]) + 1)},
    "fraction": lambda f: {"fraction": str(Fraction(f["fraction"]) + 1)},
    "bigint": lambda f: {"bigint": str(int(f["bigint"]) + 1)},
    "complex": lambda f: {"complex": repr(complex(f["complex"]) + 1)},
    "bytes": _bytes_turned,
    "datetime": _later,
    "date": _later,
    "time": _later,
    "timedelta": lambda f: {"timedelta": [f["timedelta"][0] + 1, *f["timedelta"][1:]]},
    "list": _in_sequence,
    "tuple": _in_sequence,
    "set": _in_set,
    "dict": _in_dict,
    "map": _in_dict,
    "dataclass": _in_fields,
    "namedtuple": _in_items,
}


def _oracle(recorded: list[Call], asked: list[Call], probes: list[Trial]) -> Oracle:
    """The oracle from a checkpoint's probe trials (the first replayed the start as well)."""
    if len(probes) < 2:
        return Oracle([], [])  # a probe's edits did not apply: nothing is reproducible
    before = _results(probes[0].replayed_before)
    results = [_results(trial.replayed) for trial in probes]
    stable, targets, telling = [], set(), set()
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
            telling.add(number)
    kept = [n for n in stable if asked[n]["function"] in targets]
    shown = [call for call in recorded if call["function"] in targets]
    seen = {_inputs_key(call) for call in shown}
    unseen = sum(n in telling and _inputs_key(asked[n]) not in seen for n in kept)
    expected = [results[0][n] for n in kept]
    return Oracle([asked[n] for n in kept], expected, shown, unseen)  # type: ignore[arg-type]


def _inputs_key(call: Call) -> str:
    """A call's inputs (where and what it calls, with which arguments) as one comparable text."""
    inputs = [call["module"], call["function"], call["args"], call["kwargs"]]
    return json.dumps(inputs, sort_keys=True)


def _results(replayed: Replayed | None) -> list[Result | None]:
    return replayed.results if replayed else []


def _at(results: list[Result | None], number: int) -> Result | None:
    return results[number] if number < len(results) else None


def _result_of(call: Call) -> Result:
    return {k: call[k] for k in ("returns", "raises", "missing") if k in call}


def same_result(expected: Result, got: Result) -> bool:
    """Whether `got` matches the reference's `expected`: one answer, and the same value
    (`same_value`), or an exception of the same class with the same chain of classes as the
    reference raised it (a subclass, or a list of every class, is another answer)."""
    if len(got) != 1:
        return False  # two answers to one call: no reference gives that
    if "raises" in expected:
        return got.get("raises") == expected["raises"]
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
    for tag in ("dict", "map"):
        if tag in a:
            return tag in b and _same_unordered(a[tag], b[tag])
    if "promise" in a:
        return isinstance(b.get("promise"), dict) and _same_settled(a["promise"], b["promise"])
    if "set" in a:
        return "set" in b and _same_unordered(a["set"], b["set"])
    for tag, state in (("dataclass", "fields"), ("namedtuple", "items"), ("object", "state")):
        if tag in a:
            return b.get(tag) == a[tag] and same_value(a.get(state), b.get(state))
    return a == b


def _same_settled(a: dict, b: dict) -> bool:
    """Whether two promises settled alike: resolved to the same value, or rejected with an
    error of the same classes."""
    if "resolves" in a:
        return set(b) == {"resolves"} and same_value(a["resolves"], b["resolves"])
    return set(b) == {"rejects"} and b["rejects"] == a.get("rejects")


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
