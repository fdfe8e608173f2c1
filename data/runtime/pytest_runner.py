"""Run a Python repository's tests with pytest inside a sandbox and read each test's outcome.

The code under test runs in the process that reports on it, so nothing it can write is taken on
trust. pytest starts through `pytest_boot/boot.py` (copied into the sandbox's root-owned folder):
no start-up hook of the repository runs and it cannot shadow pytest. Each test's outcome
reaches the grader as that test finishes, down a pipe whose read end stays outside the sandbox,
so a hook that runs later (at exit, say) cannot rewrite it. The stream's last record, pytest's
exit status and test count, is checked against the process's exit code and the outcomes
received; a run whose records disagree, or that exits cleanly without that record, is
`tampered`: it passes no test, and the evidence says why; one killed before that record
passes none either. The repository's `addopts` are dropped (they could load a plugin of its
own). Each phase's report is also checked against what was observed of it (what the test
function's call raised, and what the phase raised before any hook of the repository's could
change the report): a report better than that is tampering too, and so is a test function's
call reported passed that was never seen. The boot script's audit hook sends its own evidence
(`{"tampered": ...}`: a patched pytest, pluggy or plugin, a refused introspection). Outcomes
are keyed by pytest's test ids (`tests/test_x.py::TestCase::test_name[param]`): passed,
failed, error, skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .python_env import readable_paths, site_packages
from .sandbox import Completed, Sandbox
from .test_run import Outcome, StreamReader, TestRun, rank

BOOT = Path(__file__).resolve().parent / "pytest_boot"
# pytest's exit statuses that mean every collected test passed (0) or that some failed (1)
ALL_PASSED, SOME_FAILED = 0, 1


def run_pytest(
    sandbox: Sandbox, env: Path, tests: list[str] | None = None, timeout_s: float | None = None
) -> TestRun:
    """Run `tests` (default: the whole suite) in the sandbox's tree with `env`'s pytest."""
    args = [
        "--",
        "-q",
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",  # a test module that cannot import fails alone
        "-o",
        "addopts=",  # the repository's config cannot load a plugin of its own (`-p module`)
        f"--rootdir={sandbox.tree}",  # no config or conftest from above the copy
        f"--confcutdir={sandbox.tree}",
        *(tests or []),
    ]
    return read_stream(*run_boot_script(sandbox, env, "boot.py", args, timeout_s))


def run_boot_script(
    sandbox: Sandbox, env: Path, script: str, args: list[str], timeout_s: float | None = None
) -> tuple[bytes, Completed]:
    """Run `script` of `pytest_boot/` in the sandbox with `env`'s interpreter, without user site
    or `site` module (`-s -S`) and no `PYTHONPATH` (the script sets it for the processes the
    tests start), as `script FD SITE_PACKAGES PATHS ARGS`: what it wrote down the pipe FD, and
    how it ended."""
    boot = sandbox.provide("boot", sorted(BOOT.glob("*.py")))
    paths = os.pathsep.join([str(sandbox.tree / "src"), str(sandbox.tree)])
    read_end, write_end = os.pipe()
    reader = StreamReader(read_end)
    argv = [str(env / "bin" / "python"), "-s", "-S", str(boot / script), str(write_end)]
    argv += [str(site_packages(env)), paths, *args]
    variables = {"PATH": f"{env / 'bin'}:/usr/bin:/bin"}
    try:
        completed = sandbox.run(
            argv,
            env=variables,
            timeout_s=timeout_s,
            pass_fds=(write_end,),
            readable=readable_paths(env),
        )
    finally:
        os.close(write_end)
    return reader.collect(), completed


def read_stream(stream: bytes, completed: Completed) -> TestRun:
    """The outcomes in `stream` (one JSON record per line, from `outcome_stream.py` and the
    boot script's audit hook), checked against how the command ended."""
    outcomes: dict[str, Outcome] = {}
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}  # observations awaiting a report
    end: dict[str, Any] | None = None
    for number, line in enumerate(stream.splitlines(), start=1):
        try:
            record = json.loads(line)
        except ValueError:
            return TestRun({}, completed, f"line {number} of the outcome stream is not JSON")
        if not isinstance(record, dict):
            return TestRun({}, completed, f"line {number} of the outcome stream is not a record")
        if "tampered" in record:
            return TestRun({}, completed, f"in the test process: {record['tampered']}"[:500])
        if end is not None:
            return TestRun({}, completed, f"a record after the session's end: {line[:200]!r}")
        if "exit" in record:
            end = record
            continue
        test, when = str(record.get("test")), str(record.get("when"))
        if "observed" in record:
            seen.setdefault((test, when), []).append(record)
            continue
        observed = _believable(seen.pop((test, when), []), record)
        # a report may say worse than what the phase raised (a strict xfail that passed is
        # reported failed), never better
        if rank(record.get("outcome")) > rank(observed):
            why = f"{test} ({when}) was observed {observed}"
            return TestRun({}, completed, f"{why} but reported {record.get('outcome')}")
        outcomes[test] = _combined(outcomes.get(test), record)
    if end is None and (completed.exit_code != 0 or completed.timed_out):
        how = "timed out" if completed.timed_out else f"exited {completed.exit_code}"
        return TestRun(outcomes, completed, incomplete=f"{how} before pytest's end record")
    return TestRun(outcomes, completed, _disagreement(outcomes, end, completed))


def _believable(observations: list[dict[str, Any]], report: dict[str, Any]) -> Outcome:
    """The best outcome a phase's report may claim, given what was observed of it: the worst
    observation; "unobserved" when nothing was (a collection failure needs none); at most
    skipped when the phase runs a test function whose call was never seen (it was not run)."""
    if report.get("when") == "collect":
        return str(report.get("outcome"))
    if not observations:
        return "unobserved"
    worst = min((str(o.get("observed")) for o in observations), key=rank)
    expects_call = any(o.get("runs") == "function" for o in observations)
    if expects_call and not any(o.get("by") == "function" for o in observations):
        return min(worst, "skipped", key=rank)
    return worst


def _combined(before: Outcome | None, record: dict[str, Any]) -> Outcome:
    """A test's outcome so far, given one more of its reports (setup, call, teardown, or a
    collection failure): as pytest's own JUnit report counts them."""
    when, outcome = record.get("when"), record.get("outcome")
    if before == "error" or (outcome == "failed" and when != "call"):
        return "error"
    if outcome == "failed" or before == "failed":
        return "failed"
    if outcome == "skipped" or before == "skipped":
        return "skipped"
    if when == "call" and outcome == "passed":
        return "passed"
    return before or "incomplete"  # set up, never called (yet)


def _disagreement(
    outcomes: dict[str, Outcome], end: dict[str, Any] | None, completed: Completed
) -> str:
    """Why the stream cannot be believed, or "" when it agrees with itself and the exit."""
    failing = sorted(t for t, o in outcomes.items() if o in ("failed", "error"))
    if end is None:
        return "the process exited 0 before pytest finished its session"
    status = end.get("exit")
    if status != completed.exit_code and not completed.timed_out:
        return f"pytest ended with status {status} but the process exited {completed.exit_code}"
    if status == ALL_PASSED and failing:
        return f"pytest reported success with failing tests: {', '.join(failing[:5])}"
    if status == SOME_FAILED and not failing:
        return "pytest reported failures but no test failed"
    reported = sum("::" in test for test in outcomes)  # test items, not collection errors
    collected = end.get("collected")
    if isinstance(collected, int) and reported > collected:
        return f"{reported} tests reported, {collected} collected"
    return ""
