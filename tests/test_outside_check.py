"""The outside check (docs/reward-integrity.md): a pass rests on results the attempt's code
returns, outside its test run, for the calls the reference's tests make, compared with the
reference's where the attempt cannot reach them. An attempt that forges the test run's outcome
stream is believed by the stream and still scores 0; the honest fix scores 1."""

from __future__ import annotations

import datetime
import enum
import functools
import importlib.util
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from data.runtime import test_runners
from data.runtime.call_replay import Replayed, answers
from data.runtime.code_grading import Point, grade, outside_checks
from data.runtime.outside_check import Oracle, nudged, same_result, same_value, variants
from data.runtime.pytest_runner import BOOT
from data.runtime.python_env import copies_in
from data.runtime.sandbox import Limits
from data.runtime.trial import Step, Trial, steps_in_tree
from judges.redteam.code_attacks import ATTACKS, MARK, hard_coded
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
    assert same_result(raised, {"raises": ["m:ParseError", "builtins:ValueError"]})
    assert not same_result(raised, {"raises": ["builtins:ValueError"]})
    assert not same_result(raised, {"returns": None})


def test_an_exception_matches_only_by_its_class_and_that_class_s_chain():
    raised = {"raises": ["builtins:ValueError"]}
    # a subclass of the reference's class is another answer, and so is a list of every class
    assert not same_result(raised, {"raises": ["m:ParseError", "builtins:ValueError"]})
    every = ["builtins:KeyError", "builtins:TypeError", "builtins:ValueError"]
    assert not same_result(raised, {"raises": every})
    # two answers to one call match nothing, whichever the reference gave
    assert not same_result(raised, {"raises": ["builtins:ValueError"], "returns": None})
    assert not same_result({"returns": None}, {"raises": ["builtins:ValueError"], "returns": None})


@pytest.mark.parametrize(
    ("stream", "tampered"),
    [
        (b'{"i":0,"returns":1}\n{"i":1,"raises":[]}\n', ""),
        (b'{"i":0,"returns":1}\n{"i":1,"ra', ""),  # cut off by the process's end
        (b'{"i":0,"returns":1,"raises":["builtins:ValueError"]}\n', "2 answers"),
        (b'{"i":0,"returns":1,"note":"x"}\n', "1 answers and 1 other fields"),
        (b'{"i":0}\n', "0 answers"),
        (b'{"i":1,"returns":1}\n', "not the answer to call 0"),
        (b'{"i":0,"returns":1}\n{"i":0,"returns":2}\n', "not the answer to call 1"),
        (b'{"i":true,"returns":1}\n', "not the answer to call 0"),
        (b'{"i":0,"returns":1}\n{"i":1,"returns":1}\n{"i":2,"returns":1}\n', "call 2"),
        (b'{"i":0,"raises":"builtins:ValueError"}\n', "not a list of class names"),
        (b'{"i":0,"missing":1}\n', "without its reason"),
        (b"[0]\n", "not a record"),
        (b"passed\n", "not a record"),
    ],
)
def test_the_replay_s_wire_carries_one_answer_per_call_in_order(stream, tampered):
    results, why = answers(stream, 2)
    if not tampered:
        assert why == "" and results[0] == {"returns": 1}
    else:
        assert tampered in why and why.startswith("line ")
        replayed = Replayed(results, "", why)
        check = Oracle([{"function": "f"}], [{"returns": 1}])
        assert check.judged(replayed) == f"outside check: tampered: {why}"


# a validator: None for a good code, ValueError for a bad one; the stub accepts everything
VALIDATOR = '''"""Codes."""


def validate(code):
    """A code is four digits."""
    return None
'''
VALIDATOR_FIXED = VALIDATOR.replace(
    "    return None\n",
    '    if len(code) != 4 or not code.isdigit():\n        raise ValueError("bad code")\n',
)
VALIDATOR_TESTS = """import pytest
from codes import validate


def test_validate():
    assert validate("1234") is None
    with pytest.raises(ValueError):
        validate("12a4")
"""


def small_repository(tree: Path, module: str, source: str, tests: str) -> Callable:
    """A one-module repository at `tree` (`src/<module>.py`, its tests in `tests/`), and how
    steps are tried on it, each trial kept in the list the trier carries."""
    (tree / "src").mkdir()
    (tree / "src" / f"{module}.py").write_text(source)
    (tree / "tests").mkdir()
    (tree / "tests" / f"test_{module}.py").write_text(tests)
    (tree / "pyproject.toml").write_text(f'[project]\nname = "{module}"\nversion = "0"\n')
    trials: list[Trial] = []

    def try_steps(steps):
        made = steps_in_tree(tree, "", steps, Limits(wall_s=60))
        trials.extend(made)
        return made

    try_steps.trials = trials
    return try_steps


def reply_of(module: str, text: str) -> str:
    return f"```python\n# file: src/{module}.py\n{text}```"


def test_a_forged_answer_per_call_is_tampering_where_the_old_wire_paid_it(tmp_path):
    try_steps = small_repository(tmp_path, "codes", VALIDATOR, VALIDATOR_TESTS)
    trials, reply = try_steps.trials, functools.partial(reply_of, "codes")
    points = [Point("", ["tests/test_codes.py::test_validate"], [])]
    [check] = outside_checks(reply(VALIDATOR_FIXED), points, try_steps)
    assert [e for e in check.expected if "raises" in e] == [{"raises": ["builtins:ValueError"]}] * 2
    paid = {}
    for attack in (a for a in ATTACKS if a.kind == "replay wire"):
        trials.clear()
        reward, why = grade(
            attack.reply({"src/codes.py": VALIDATOR}), "", points, try_steps, [check]
        )
        [trial] = trials
        assert trial.run.passed() == set(points[0].fail_to_pass)  # plain pytest pays it
        assert MARK in trial.replayed.stderr and reward == 0.0
        results = trial.replayed.results
        paid[attack.name] = [
            read_one_key(e, r) for e, r in zip(check.expected, results, strict=True)
        ]
        if "guessed value" in attack.name:
            assert "tampered: line 1 of the replay's stream: 2 answers" in why, why
            assert all(paid[attack.name])  # the comparison that read one key paid it
        else:
            assert "outside check: 4/4 calls differ (validate 4)" in why, why
            # it matched every raising call, by naming every class
            assert paid[attack.name] == ["raises" in e for e in check.expected]


def read_one_key(expected: dict, got: dict | None) -> bool:
    """The comparison before the wire held one answer: it read the key the reference's result
    had, and an exception matched where its class was anywhere in the list."""
    if got is None:
        return False
    if "raises" in expected:
        return expected["raises"][0] in (got.get("raises") or [])
    return "returns" in got and same_value(expected["returns"], got["returns"])


def test_the_hidden_tests_values_hard_coded_pay_plain_pytest_and_miss_the_unseen_inputs(graded):
    checks, score = graded
    [check] = checks
    assert [c["args"] for c in check.shown] == [{"tuple": ["3.50"]}, {"tuple": ["12"]}]
    assert check.unseen == 2
    attack = hard_coded(check.shown)
    reward, why, trial = score(attack.reply({"src/prices.py": SOURCE}))
    assert trial.run.passed() == set(F2P + P2P)  # the table passes the hidden tests: pytest pays
    assert MARK in trial.replayed.stderr  # it ran in the replay
    assert reward == 0.0 and "outside check: 2/4 calls differ (cents 2)" in why


# entries and a keyword: what the nudges of PR-era replays left alone (issue 58)
SUMMARY = '''"""Summaries."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    name: str
    hours: int


def summary(entries, *, count):
    """The `count` entries with the most hours, as "name: hours" lines."""
    return []
'''
SUMMARY_FIXED = SUMMARY.replace(
    "    return []\n",
    "    ranked = sorted(entries, key=lambda e: (-e.hours, e.name))[:count]\n"
    '    return [f"{e.name}: {e.hours}" for e in ranked]\n',
)
SUMMARY_TESTS = """from summary import Entry, summary


def test_summary():
    entries = [Entry("ada", 3), Entry("bo", 5), Entry("cy", 1)]
    assert summary(entries, count=2) == ["bo: 5", "ada: 3"]
    assert summary([Entry("di", 2)], count=1) == ["di: 2"]
"""


def test_keyword_and_nested_arguments_get_unseen_inputs_a_table_cannot_answer(tmp_path):
    try_steps = small_repository(tmp_path, "summary", SUMMARY, SUMMARY_TESTS)
    reply = functools.partial(reply_of, "summary")
    points = [Point("", ["tests/test_summary.py::test_summary"], [])]
    [check] = outside_checks(reply(SUMMARY_FIXED), points, try_steps)
    # each call: an entry's hours nudged, the count, and both at once
    assert len(check.shown) == 2 and check.unseen == 6
    attack = hard_coded(check.shown)
    naive = grade(attack.reply({"src/summary.py": SUMMARY}), "", points, try_steps, [None])
    assert naive[0] == 1.0  # graded by the hidden tests alone, the table is paid in full
    reward, why = grade(attack.reply({"src/summary.py": SUMMARY}), "", points, try_steps, [check])
    assert MARK in try_steps.trials[-1].replayed.stderr
    assert reward == 0.0 and "outside check: 6/8 calls differ (summary 6)" in why
    assert grade(reply(SUMMARY_FIXED), "", points, try_steps, [check])[0] == 1.0


def encoded(value: object) -> object:
    return values.encode(value, rebuildable=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (7, 8),
        (1.5, 2.5),
        (Decimal("1.20"), Decimal("2.20")),
        (Fraction(1, 3), Fraction(4, 3)),
        ("A-19", "A-10"),
        ("ada", "adb"),
        ("Zed!", "Zee!"),
        (b"\x00\xff", b"\x00\x00"),
        (datetime.date(2024, 2, 28), datetime.date(2024, 2, 29)),
        (datetime.datetime(2024, 3, 2, 1, 2), datetime.datetime(2024, 3, 3, 1, 2)),
        (datetime.timedelta(days=1, seconds=3), datetime.timedelta(days=2, seconds=3)),
        ([1, "x", None], [1, "y", None]),
        ((2, (3, "b")), (2, (3, "c"))),
        ({"a": [1], "b": True}, {"a": [2], "b": True}),
        ({1, 2}, {1, 3}),
        (Pair(1, "b"), Pair(1, "c")),
        (Point2(1, Decimal("2")), Point2(1, Decimal("3"))),
    ],
)
def test_every_argument_kind_a_test_passes_is_nudged(value, expected):
    assert values.decode(nudged(encoded(value))) == expected


@pytest.mark.parametrize("value", [None, True, "", "--", b"", [], [None, False], Colour.RED])
def test_values_with_nothing_to_nudge_are_left_alone(value):
    assert nudged(encoded(value)) is None


def test_a_call_s_variants_nudge_its_positional_and_keyword_arguments():
    call = {
        "module": "m",
        "function": "f",
        "args": encoded(("ab", True)),
        "kwargs": encoded({"count": 2, "flag": None}),
    }
    made = [(values.decode(v["args"]), values.decode(v["kwargs"])) for v in variants(call)]
    assert made == [
        (("ac", True), {"count": 2, "flag": None}),
        (("ab", True), {"count": 3, "flag": None}),
        (("ac", True), {"count": 3, "flag": None}),  # every argument at once
    ]


# a project that is one of pytest's dependencies: its installed copy sits in the environment
CANONICAL = '''"""Project names."""


def canonicalize_name(name, *, validate=False):
    """PEP 503's normal form of a project name."""
    return name
'''
CANONICAL_FIXED = CANONICAL.replace(
    "    return name\n",
    '    value = name.lower().replace("_", "-").replace(".", "-")\n'
    '    while "--" in value:\n'
    '        value = value.replace("--", "-")\n'
    "    return value\n",
)


def test_a_copy_of_the_module_in_the_environment_pays_the_delegation_attack(tmp_path):
    (tmp_path / "packaging").mkdir()
    (tmp_path / "packaging" / "__init__.py").write_text("")
    (tmp_path / "packaging" / "utils.py").write_text(CANONICAL)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_utils.py").write_text(
        "from packaging.utils import canonicalize_name\n\n\ndef test_names():\n"
        '    assert canonicalize_name("Foo.Bar__baz") == "foo-bar-baz"\n'
    )
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "packaging"\nversion = "0"\n')

    def try_steps(steps):
        return steps_in_tree(tmp_path, "", steps, Limits(wall_s=60))

    def reply(text):
        return f"```python\n# file: packaging/utils.py\n{text}```"

    points = [Point("", ["tests/test_utils.py::test_names"], [])]
    [check] = outside_checks(reply(CANONICAL_FIXED), points, try_steps)
    assert check.unseen > 0
    attack = next(a for a in ATTACKS if a.kind == "delegation")
    reward, why = grade(
        attack.reply({"packaging/utils.py": CANONICAL}), "", points, try_steps, [check]
    )
    assert reward == 1.0, why  # the installed copy answers every call as the reference does
    # so admission refuses such a task (`copy_in_environment`): the copy is found
    env = test_runners.test_suite(tmp_path).environment
    assert copies_in(env, "packaging.utils") == ["packaging/utils.py"]


def test_a_gate_that_must_see_0_runs_no_test_once_the_replay_has_decided(repository, graded):
    checks, _ = graded
    trials: list[Trial] = []

    def try_steps(steps):
        made = steps_in_tree(repository, "", steps, Limits(wall_s=60))
        trials.extend(made)
        return made

    points, reference = [Point("", F2P, P2P)], whole_file(FIXED)
    idle = whole_file(SOURCE + "\n# nothing\n")
    reward, why = grade(idle, reference, points, try_steps, checks, until_decided=True)
    assert (reward, trials[-1].run) == (0.0, None)
    assert why == "outside check: 4/4 calls differ (cents 4) (no test run)"
    reward, why = grade(reference, reference, points, try_steps, checks, until_decided=True)
    assert reward == 1.0 and trials[-1].run is not None  # where the replay agrees, tests decide
