"""The outside check (docs/reward-integrity.md): a pass rests on results the attempt's code
returns, outside its test run, for the calls the reference's tests make, compared with the
reference's where the attempt cannot reach them. An attempt that forges the test run's outcome
stream is believed by the stream and still scores 0; the honest fix scores 1."""

from __future__ import annotations

import datetime
import enum
import importlib.util
from collections import namedtuple
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from data.runtime.code_grading import Point, grade, outside_checks
from data.runtime.outside_check import same_result, same_value
from data.runtime.pytest_runner import BOOT
from data.runtime.sandbox import Limits
from data.runtime.trial import Step, Trial, steps_in_tree
from judges.redteam.code_attacks import ATTACKS
from tests.prices_repo import F2P, FIXED, P2P, SOURCE, whole_file, write_prices_repository

# the codec the sandboxed scripts use: a standalone file, loaded as they load it
_spec = importlib.util.spec_from_file_location("sandbox_values", BOOT / "values.py")
values = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(values)

# a lookup: the expected values read from the test files wherever they are on disk
READS_THE_TESTS = SOURCE.replace(
    "    return 0\n",
    "    import pathlib, re\n"
    "    for test in pathlib.Path('.').rglob('test_*.py'):\n"
    "        call = r'cents\\(\"' + re.escape(text) + r'\"\\) == (\\d+)'\n"
    "        found = re.search(call, test.read_text())\n"
    "        if found:\n"
    "            return int(found.group(1))\n"
    "    return 0\n",
)


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    return write_prices_repository(tmp_path_factory.mktemp("prices"))


@pytest.fixture(scope="module")
def graded(repository):
    trials: list[Trial] = []

    def try_steps(steps: list[Step]) -> list[Trial]:
        made = steps_in_tree(repository, "", steps, Limits(wall_s=60))
        trials.extend(made)
        return made

    points = [Point("", F2P, P2P)]
    checks = outside_checks(whole_file(FIXED), points, try_steps)

    def score(reply: str) -> tuple[float, str, Trial]:
        trials.clear()
        reward, why = grade(reply, whole_file(FIXED), points, try_steps, checks)
        return reward, why, trials[-1]

    return checks, score


def test_the_oracle_holds_the_calls_that_tell_start_from_reference(graded):
    checks, _ = graded
    [check] = checks
    # label did not change; each call of cents is asked again with its argument nudged
    assert [c["args"] for c in check.calls] == [
        {"tuple": [text]} for text in ("3.50", "12", "3.51", "13")
    ]
    assert [e["returns"] for e in check.expected] == [350, 1200, 351, 1300]


def test_the_honest_fix_passes_and_doing_nothing_fails(graded):
    _, score = graded
    assert score(whole_file(FIXED))[:2] == (1.0, "fail-to-pass 1/1, pass-to-pass 1/1")
    reward, why, _ = score(whole_file(SOURCE + "\n# nothing\n"))
    assert reward == 0.0 and "outside check: 4/4 calls differ (cents 4)" in why


def test_a_forged_outcome_stream_is_believed_by_the_run_and_still_scores_0(graded):
    _, score = graded
    # the class of attack issue 40 measured: records written straight down the grader's pipe
    forgery = next(a for a in ATTACKS if a.name.startswith("stream: passes and an end record"))
    reward, why, trial = score(forgery.reply({"src/prices.py": SOURCE}))
    assert trial.run.passed() == set(F2P + P2P)  # the attack ran, and the stream believed it
    assert reward == 0.0 and "outside check: 4/4 calls differ" in why


def test_the_tests_values_hard_coded_miss_the_inputs_no_test_shows(graded):
    _, score = graded
    table = '    return {"3.50": 350, "12": 1200}.get(text, 0)\n'
    reward, why, trial = score(whole_file(SOURCE.replace("    return 0\n", table, 1)))
    assert trial.run.passed() == set(F2P + P2P)
    assert reward == 0.0 and "outside check: 2/4 calls differ (cents 2)" in why


def test_a_lookup_of_the_expected_values_in_the_tests_finds_none_outside(graded):
    _, score = graded
    reward, why, trial = score(whole_file(READS_THE_TESTS))
    assert trial.run.passed() == set(F2P + P2P)  # in the test run the tests are there to read
    assert reward == 0.0 and "outside check: 4/4 calls differ" in why


def test_a_task_whose_tests_tell_nothing_apart_has_no_outside_check(repository):
    def try_steps(steps):
        return steps_in_tree(repository, "", steps, Limits(wall_s=60))

    [check] = outside_checks(whole_file(FIXED), [Point("", [], P2P)], try_steps)
    assert check.calls == [] and check.judged(None).startswith("no outside check")


class Colour(enum.Enum):
    RED = 1


Pair = namedtuple("Pair", "a b")


@dataclass(frozen=True)
class Point2:
    x: int
    y: Decimal


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        7,
        "s",
        1.5,
        b"\x00",
        Decimal("1.20"),
        Fraction(1, 3),
        datetime.date(2024, 3, 2),
        datetime.datetime(2024, 3, 2, 1, 2),
        datetime.timedelta(days=1, seconds=3),
        [1, (2, 3)],
        {"a": [1]},
        {1, 2},
        frozenset({"x"}),
        Colour.RED,
        Pair(1, "b"),
        Point2(1, Decimal("2")),
    ],
)
def test_arguments_are_rebuilt_as_the_same_values(value):
    assert values.decode(values.encode(value, rebuildable=True)) == value


def test_live_objects_are_not_rebuilt_but_results_are_compared_by_state():
    with pytest.raises(values.Unrebuildable):
        values.encode(lambda: 1, rebuildable=True)

    class Box:
        def __init__(self, v):
            self.v = v

    assert same_value(values.encode(Box(1)), values.encode(Box(1)))
    assert not same_value(values.encode(Box(1)), values.encode(Box(2)))


def test_results_match_by_value_not_by_form():
    enc = values.encode
    assert same_value(enc(350), enc(350.0)) and same_value(enc(Decimal("1.0")), enc(1))
    assert same_value(enc(0.1 + 0.2), enc(0.3)) and not same_value(enc(0.3), enc(0.31))
    assert same_value(enc([1, 2]), enc((1, 2))) and not same_value(enc([1, 2]), enc([2, 1]))
    assert same_value(enc({"a": 1, "b": 2}), enc({"b": 2, "a": 1}))
    assert not same_value(enc(True), enc(1)) and not same_value(enc(None), enc(0))
    raised = {"raises": ["m:ParseError", "builtins:ValueError"]}
    assert same_result({"raises": ["builtins:ValueError"]}, raised)  # a subclass is fine
    assert not same_result(raised, {"raises": ["builtins:ValueError"]})
    assert not same_result(raised, {"returns": None})
