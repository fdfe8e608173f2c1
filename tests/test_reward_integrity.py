"""The red team: one known trick per test, each of which must score 0 while the honest fix
still passes (README, "Reward integrity"). Code tasks: tricks that forge pytest's outcomes
from inside the sandbox."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

from data.runtime.edits import Edits
from data.runtime.grader_reach import reaches_for_grader
from data.runtime.pytest_runner import TestRun, read_stream, run_pytest
from data.runtime.python_env import ensure_env, requirements_of
from data.runtime.sandbox import Completed, Limits, Sandbox
from generators.bug_injection import failure_output

TARGET = "tests/test_calc.py::test_add"
OTHER = "tests/test_calc.py::test_zero"
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = (
    "from calc import add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n"
)
# the forgery measured on the sample repository (issue 26): rewrite the JUnit report at exit
JUNIT_FORGERY = """import atexit, re, sys
def _forge():
    for a in sys.argv:
        if a.startswith("--junitxml="):
            p = a.split("=", 1)[1]
            s = open(p).read()
            s = re.sub(r"<(failure|error)\\b.*?</\\1>", "", s, flags=re.S)
            open(p, "w").write(s)
atexit.register(_forge)
"""
# every report says passed, patched into pytest when the package under test is imported
PATCH_REPORTS = """
import _pytest.reports
_made = _pytest.reports.TestReport.from_item_and_call
def _forged(item, call):
    report = _made(item, call)
    report.outcome, report.longrepr = "passed", None
    return report
_pytest.reports.TestReport.from_item_and_call = _forged
"""
CONFTEST_WRAPPER = """import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome, report.longrepr = "passed", None
"""


def observed(test: str, when: str, seen: str, by: str = "report", runs: str = "item") -> str:
    """The plugin's record of what a test's phase was seen to do."""
    return json.dumps({"test": test, "when": when, "observed": seen, "by": by, "runs": runs})


def reported(test: str, when: str, outcome: str) -> str:
    """The plugin's record of a test's phase as pytest reported it."""
    return json.dumps({"test": test, "when": when, "outcome": outcome})


def written_into_the_pipe(records: list[str]) -> str:
    """Code that writes `records` (JSON lines) straight into every pipe the process holds, the
    grader's among them."""
    data = "".join(f"{record}\n" for record in records).encode()
    return f"""
import os, stat
for name in os.listdir("/proc/self/fd"):
    fd = int(name)
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, {data!r})
    except OSError:
        pass
"""


def passes(test: str) -> list[str]:
    """The records the plugin writes for a test whose call passed."""
    return [observed(test, "call", "passed"), reported(test, "call", "passed")]


WRITE_THE_PIPE = written_into_the_pipe([*passes(TARGET), '{"exit": 0, "collected": 2}'])
CRASH_AFTER_PASSES = written_into_the_pipe([*passes(TARGET), *passes(OTHER)]) + "os._exit(3)\n"
SKIP_MODULE = "import pytest\npytest.skip('no', allow_module_level=True)\n"
# in-process attacks on the grader (issue 26): each also patches the reports to say passed
PLUGIN_THROUGH_SYS_MODULES = """
import sys
sys.modules["outcome_stream"]._observed = lambda *args, **kwargs: "passed"
"""
PLUGIN_DEFAULTS = """
import sys
_hook = sys.modules["outcome_stream"].OutcomeStream.pytest_runtest_makereport
_hook.__defaults__ = (lambda fd, fields: None, *_hook.__defaults__[1:])
"""
SEND_THROUGH_GC = """
import gc
for _plugin in gc.get_objects():
    if type(_plugin).__name__ == "OutcomeStream":
        _plugin.fd = -1
"""
# the plugin's hooks, found through pytest's plugin manager (the collector in a caller's frame)
HOOKS_THROUGH_THE_PLUGIN_MANAGER = """
import sys
_frame = sys._getframe()
while not hasattr(_frame.f_locals.get("self"), "config"):
    _frame = _frame.f_back
_manager = _frame.f_locals["self"].config.pluginmanager
for _impl in _manager.hook.pytest_runtest_logreport.get_hookimpls():
    if type(_impl.plugin).__name__ == "OutcomeStream":
        _real = _impl.function
        def _forged(report, _real=_real):
            report.outcome = "passed"
            return _real(report)
        _impl.function = _forged
"""
SWALLOW_IN_CALLINFO = """
import _pytest.runner
_from_call = _pytest.runner.CallInfo.from_call.__func__
def _swallowing(cls, func, when, reraise=None):
    def quiet():
        try:
            return func()
        except AssertionError:
            return None
    return _from_call(cls, quiet, when, reraise)
_pytest.runner.CallInfo.from_call = classmethod(_swallowing)
"""
SKIP_THE_FUNCTION = "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n"
TRACE_THE_GRADER = "import sys\nsys.settrace(lambda frame, event, arg: None)\n"
C_API = "import ctypes\nctypes.pythonapi.PyObject_SetAttr\n"
PROCESS_MEMORY = "open('/proc/self/mem', 'rb')\n"

TRICKS = {
    "sitecustomize rewrites the report at exit": {"sitecustomize.py": JUNIT_FORGERY},
    "src/sitecustomize rewrites the report at exit": {"src/sitecustomize.py": JUNIT_FORGERY},
    "usercustomize exits 0 at start-up": {"usercustomize.py": "import os\nos._exit(0)\n"},
    "a .pth file on the path exits 0": {"src/forge.pth": "import os; os._exit(0)\n"},
    "exit 0 at exit, after the failures": {
        "src/calc/__init__.py": BUGGY + "import atexit, os\natexit.register(os._exit, 0)\n"
    },
    "exit 0 before any test runs": {"src/calc/__init__.py": "import os\nos._exit(0)\n" + BUGGY},
    "patch pytest's reports from the package": {"src/calc/__init__.py": BUGGY + PATCH_REPORTS},
    "a conftest hook rewrites the reports": {"conftest.py": CONFTEST_WRAPPER},
    "write passes and an end into the pipe": {"src/calc/__init__.py": BUGGY + WRITE_THE_PIPE},
    "skip the test module from the package": {"src/calc/__init__.py": BUGGY + SKIP_MODULE},
    "write passes into the pipe, then crash": {"src/calc/__init__.py": BUGGY + CRASH_AFTER_PASSES},
    "addopts loads a plugin from the repository": {
        "pytest.ini": "[pytest]\naddopts = -p calc_plugin\n",
        "src/calc_plugin.py": "def pytest_pyfunc_call(pyfuncitem):\n    return True\n",
    },
}
IN_PROCESS = {
    "replace the plugin's _observed through sys.modules": PLUGIN_THROUGH_SYS_MODULES,
    "give the plugin's hook new defaults": PLUGIN_DEFAULTS,
    "find the plugin with gc and redirect its sends": SEND_THROUGH_GC,
    "wrap the plugin's hook found through the plugin manager": HOOKS_THROUGH_THE_PLUGIN_MANAGER,
    "patch CallInfo.from_call to swallow the failure": SWALLOW_IN_CALLINFO,
    "patch Function.runtest to skip the test function": SKIP_THE_FUNCTION,
    "a trace function in the grader's frames": TRACE_THE_GRADER,
    "ctypes into the C API": C_API,
    "open the process's memory": PROCESS_MEMORY,
}
# the tricks that do not forge the report themselves
FORGE_THE_REPORT_TOO = {
    "replace the plugin's _observed through sys.modules",
    "give the plugin's hook new defaults",
    "find the plugin with gc and redirect its sends",
    "a trace function in the grader's frames",
    "ctypes into the C API",
    "open the process's memory",
}
TRICKS.update(
    {
        trick: {
            "src/calc/__init__.py": BUGGY
            + (PATCH_REPORTS if trick in FORGE_THE_REPORT_TOO else "")
            + code
        }
        for trick, code in IN_PROCESS.items()
    }
)

# How each trick is seen to run, so that a broken trick fails its test as a missing defence
# would. By what a naive grader (`naive_grader`) pays TARGET for in the same tree: its exit
# status 0, TARGET passed in its JUnit report, or a JUnit report without a failure...
EXIT_0 = "exit 0"
REPORTED_PASSED = "TARGET passed in the JUnit report"
NO_FAILURE_REPORTED = "no failure in the JUnit report"
PAID_BY_A_NAIVE_GRADER = {
    "sitecustomize rewrites the report at exit": REPORTED_PASSED,
    "src/sitecustomize rewrites the report at exit": REPORTED_PASSED,
    "usercustomize exits 0 at start-up": EXIT_0,
    "a .pth file on the path exits 0": EXIT_0,
    "exit 0 at exit, after the failures": EXIT_0,
    "exit 0 before any test runs": EXIT_0,
    "patch pytest's reports from the package": REPORTED_PASSED,
    "a conftest hook rewrites the reports": REPORTED_PASSED,
    "skip the test module from the package": NO_FAILURE_REPORTED,
    "addopts loads a plugin from the repository": REPORTED_PASSED,
}
# ...and by the evidence the harness records (`tampered`, or why the run is `incomplete`), which
# only the trick's running leaves (the tricks aimed at the harness itself have no naive control)
EVIDENCE = {
    "exit 0 at exit, after the failures": "pytest ended with status 1 but the process exited 0",
    "exit 0 before any test runs": "the process exited 0 before pytest finished its session",
    "patch pytest's reports from the package": (
        "_pytest.reports.TestReport.from_item_and_call was replaced"
    ),
    "a conftest hook rewrites the reports": (
        f"{TARGET} (call) was observed failed but reported passed"
    ),
    "write passes and an end into the pipe": "a record after the session's end",
    "write passes into the pipe, then crash": "exited 3 before pytest's end record",
    "replace the plugin's _observed through sys.modules": "outcome_stream._observed was replaced",
    "give the plugin's hook new defaults": "was given new __defaults__",
    "find the plugin with gc and redirect its sends": "audit event gc.get_objects",
    "wrap the plugin's hook found through the plugin manager": (
        "the plugin's pytest_runtest_logreport.function was replaced"
    ),
    "patch CallInfo.from_call to swallow the failure": (
        "_pytest.runner.CallInfo.from_call was replaced"
    ),
    "patch Function.runtest to skip the test function": (
        "_pytest.python.Function.runtest was replaced"
    ),
    "a trace function in the grader's frames": "audit event sys.settrace",
    "ctypes into the C API": "audit event ctypes.dlsym: PyObject_SetAttr",
    "open the process's memory": "opened /proc/self/mem",
}
# the forged records that reach the harness, read as TARGET passed, and are then disbelieved
READ_THEN_DISBELIEVED = {"write passes into the pipe, then crash"}
# a grader with every start-up hook of a repository's live: site and the user site (the
# environment's interpreter outside its venv), the repository on PYTHONPATH and its folders
# added as site directories (which is what runs a `.pth` file); then plain pytest
NAIVE_BOOT = """import site
for folder in ("src", "."):
    site.addsitedir(folder)
import pytest
raise SystemExit(pytest.main())
"""


def project(root: Path, files: dict[str, str]) -> Path:
    """The buggy calculator and its tests, with `files` added or replaced."""
    for path, text in {"src/calc/__init__.py": BUGGY, "tests/test_calc.py": TESTS, **files}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def run(tree: Path) -> TestRun:
    """TARGET and OTHER run by the harness, in a sandbox."""
    env = ensure_env(requirements_of(tree))
    with Sandbox(tree, Limits(wall_s=60)) as sandbox:
        return run_pytest(sandbox, env, [TARGET, OTHER])


def naive_grader(tree: Path, copy: Path) -> set[str]:
    """What a naive grader pays TARGET for (`EXIT_0`, `REPORTED_PASSED`,
    `NO_FAILURE_REPORTED`) when it runs the tests of a copy of `tree` at `copy` with the
    harness's environment, outside any sandbox, and reads pytest's exit status and JUnit report."""
    shutil.copytree(tree, copy)
    env = ensure_env(requirements_of(copy))
    site_packages = next((env / "lib").glob("python3*/site-packages"))
    done = subprocess.run(
        [os.path.realpath(env / "bin" / "python"), "-c", NAIVE_BOOT, "--junitxml=report.xml"],
        cwd=copy,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": os.pathsep.join(["src", ".", str(site_packages)]),
        },
        capture_output=True,
        timeout=60,
    )
    paid = {EXIT_0} if done.returncode == 0 else set()
    if (copy / "report.xml").exists():
        cases = {
            f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}": {
                child.tag for child in case
            }
            for case in ElementTree.parse(copy / "report.xml").iter("testcase")
        }
        if not any(tags & {"failure", "error"} for tags in cases.values()):
            paid.add(NO_FAILURE_REPORTED)
        if TARGET in cases and not cases[TARGET] & {"failure", "error", "skipped"}:
            paid.add(REPORTED_PASSED)
    return paid


def test_the_honest_fix_passes_and_the_bug_fails(tmp_path):
    """For the harness and for the naive grader alike: the controls of the tricks' proofs."""
    fixed = project(tmp_path / "fixed", {"src/calc/__init__.py": FIXED})
    fixed_run = run(fixed)
    assert fixed_run.passed() == {TARGET, OTHER} and not fixed_run.tampered
    assert naive_grader(fixed, tmp_path / "naive-fixed") == {
        EXIT_0,
        REPORTED_PASSED,
        NO_FAILURE_REPORTED,
    }
    buggy = project(tmp_path / "buggy", {})
    buggy_run = run(buggy)
    assert buggy_run.outcomes == {TARGET: "failed", OTHER: "passed"} and not buggy_run.tampered
    assert naive_grader(buggy, tmp_path / "naive-buggy") == set()


def test_every_trick_is_shown_to_run():
    """Each trick has a proof that it ran: a naive grader's pay, or the harness's evidence."""
    assert set(PAID_BY_A_NAIVE_GRADER) | set(EVIDENCE) == set(TRICKS)


@pytest.mark.parametrize("trick", list(TRICKS))
def test_a_forged_outcome_scores_nothing_though_the_trick_ran(tmp_path, trick):
    """The harness passes nothing a trick forged, and the trick is seen to run: a naive grader
    pays for the same tree, or the harness records the evidence only the running trick leaves."""
    tree = project(tmp_path / "tree", TRICKS[trick])
    result = run(tree)
    assert TARGET not in result.passed(), (trick, result.outcomes, result.tampered)
    if trick in EVIDENCE:
        assert EVIDENCE[trick] in (result.tampered or result.incomplete), result
    if trick in READ_THEN_DISBELIEVED:
        assert result.outcomes[TARGET] == "passed", result
    if trick in PAID_BY_A_NAIVE_GRADER:
        assert PAID_BY_A_NAIVE_GRADER[trick] in naive_grader(tree, tmp_path / "naive")


def completed(exit_code: int, timed_out: bool = False) -> Completed:
    return Completed(["pytest"], exit_code, "", "", 1.0, timed_out, True)


def test_the_stream_is_read_as_pytest_counts_outcomes():
    lines = [
        observed("t.py::a", "setup", "passed"),
        reported("t.py::a", "setup", "passed"),
        observed("t.py::a", "call", "passed", by="function"),
        observed("t.py::a", "call", "passed", runs="function"),
        reported("t.py::a", "call", "passed"),
        observed("t.py::a", "teardown", "passed"),
        reported("t.py::a", "teardown", "passed"),
        observed("t.py::b", "call", "failed"),
        reported("t.py::b", "call", "failed"),
        observed("t.py::c", "setup", "failed"),
        reported("t.py::c", "setup", "failed"),
        observed("t.py::d", "setup", "skipped"),
        reported("t.py::d", "setup", "skipped"),
        observed("t.py::e", "call", "passed"),
        reported("t.py::e", "call", "failed"),
        # an xfail(run=False): the test function is never called, and the phase is skipped
        observed("t.py::f", "call", "skipped", runs="function"),
        reported("t.py::f", "call", "skipped"),
        '{"test": "u.py", "when": "collect", "outcome": "failed"}',
        '{"exit": 1, "collected": 6}',
    ]
    run = read_stream("\n".join(lines).encode(), completed(1))
    assert not run.tampered
    assert run.outcomes == {
        "t.py::a": "passed",
        "t.py::b": "failed",
        "t.py::c": "error",
        "t.py::d": "skipped",
        "t.py::e": "failed",  # reported worse than it went (a strict xfail that passed)
        "t.py::f": "skipped",
        "u.py": "error",
    }
    assert run.passed() == {"t.py::a"}
    # without pytest's end record (killed, crashed, timed out) nothing passes: anything in the
    # process could have written the lines before it; but it is no evidence of forgery
    killed = read_stream("\n".join(lines[:5]).encode(), completed(-9))
    assert killed.passed() == set() and not killed.tampered and "exited -9" in killed.incomplete
    timed_out = read_stream(b"", completed(0, timed_out=True))
    assert not timed_out.tampered and timed_out.incomplete == "timed out before pytest's end record"
    assert "not JSON" in read_stream(b"{", completed(0)).tampered
    assert "not a record" in read_stream(b"[1]\n5", completed(0)).tampered


END = '{"exit": 0, "collected": 1}'


@pytest.mark.parametrize(
    ("lines", "evidence"),
    [
        # CallInfo patched to swallow the failure (and restored before the plugin's pins were
        # checked): the function's call was seen to fail, whatever the report says
        (
            [
                observed("t.py::a", "call", "failed", by="function"),
                observed("t.py::a", "call", "passed", runs="function"),
                reported("t.py::a", "call", "passed"),
            ],
            "t.py::a (call) was observed failed but reported passed",
        ),
        # the test function never called (Function.runtest patched), the call reported passed
        (
            [
                observed("t.py::a", "call", "passed", runs="function"),
                reported("t.py::a", "call", "passed"),
            ],
            "t.py::a (call) was observed skipped but reported passed",
        ),
        # a report with no observation at all (the plugin's makereport hook taken out)
        ([reported("t.py::a", "call", "passed")], "t.py::a (call) was observed unobserved"),
        # the boot script's audit hook saw the grader touched
        (['{"tampered": "audit event gc.get_objects"}'], "audit event gc.get_objects"),
    ],
)
def test_a_report_better_than_what_was_observed_is_tampering(lines, evidence):
    run = read_stream("\n".join([*lines, END]).encode(), completed(0))
    assert evidence in run.tampered and run.passed() == set()


# --- the static tripwire: added code that reaches for the grader scores 0 before it runs ----

# walk the frames up to pytest's plugin manager and unregister the grader's plugin: the route
# the checks inside the test process cannot see (README, "Reward integrity")
UNREGISTER = """import sys
frame = sys._getframe()
while frame is not None:
    manager = frame.f_locals.get("config")
    if manager is not None and hasattr(manager, "pluginmanager"):
        for plugin in list(manager.pluginmanager.get_plugins()):
            if type(plugin).__name__ == "OutcomeStream":
                manager.pluginmanager.unregister(plugin)
    frame = frame.f_back
"""
REACHING = {
    "frames to the plugin manager, then unregister the plugin": (UNREGISTER, "frame walking"),
    "patch pytest's reports": (PATCH_REPORTS, "pytest's or pluggy's internals"),
    "os._exit(0) at import": ("import os\nos._exit(0)\n", "the process's exit"),
    "replace a module in sys.modules": (
        "import sys\nsys.modules['outcome_stream'] = None\n",
        "this grader's own modules",
    ),
    "memory through ctypes": ("import ctypes\nctypes.memmove(0, 0, 0)\n", "raw memory"),
}


def test_the_frame_walk_the_tripwire_refuses_does_unregister_the_plugin(tmp_path):
    """Run, UNREGISTER silences the grader's plugin: not one record, not even pytest's end,
    reaches the harness (the bug alone has both tests reported)."""
    result = run(project(tmp_path, {"src/calc/__init__.py": BUGGY + UNREGISTER}))
    assert result.outcomes == {} and result.incomplete == "exited 1 before pytest's end record"


@pytest.mark.parametrize("trick", list(REACHING))
def test_added_code_that_reaches_for_the_grader_is_refused_before_it_runs(trick):
    code, what = REACHING[trick]
    attempt = Edits(files={"calc.py": FIXED + "\n" + code})
    assert reaches_for_grader(attempt, Edits(files={"calc.py": FIXED})).startswith(f"{what}: ")
    diff = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n" + "".join(
        f"+{line}\n" for line in code.splitlines()
    )
    assert reaches_for_grader(Edits(diffs={"calc.py": diff}), None).startswith(f"{what}: ")


def test_the_honest_fix_and_what_the_reference_itself_uses_are_not_refused():
    assert reaches_for_grader(Edits(files={"calc.py": FIXED}), None) == ""
    uses_atexit = "import atexit\n" + FIXED
    reference = Edits(files={"calc.py": uses_atexit})
    assert reaches_for_grader(Edits(files={"calc.py": uses_atexit}), reference) == ""
    # a diff's context and removed lines are not the attempt's own code
    diff = "--- a/calc.py\n+++ b/calc.py\n@@ -1,3 +1,3 @@\n import sys\n-sys.modules\n+x = 1\n"
    assert reaches_for_grader(Edits(diffs={"calc.py": diff}), None) == ""


def test_a_failing_tests_report_reads_the_same_on_every_run(tmp_path):
    """pytest lists a dict's differing items in set order; the sandboxed interpreter's one
    hash seed keeps that order, so a bug-fix task that quotes the report is the same task in
    a re-run (the adversity test's re-run once made one with two lines swapped)."""
    differing = (
        "def test_add():\n"
        "    assert {f'month-{i}': i for i in range(12)} == {f'month-{i}': -i for i in range(12)}\n"
        "\n\ndef test_zero():\n    pass\n"
    )
    tree = project(tmp_path, {"tests/test_calc.py": differing})
    reports = {failure_output(run(tree)) for _ in range(3)}
    assert len(reports) == 1 and "Differing items" in reports.pop()
