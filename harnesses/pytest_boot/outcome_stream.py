"""A pytest plugin that sends each test's outcome to the grader as the test finishes.

One JSON line per test phase, written to a pipe the grader reads outside the sandbox: a line,
once written, cannot be taken back by code that runs later (an `atexit` hook, a rewritten
report file). Each line carries two views of the phase: `observed`, what the test's own call
raised (or did not), taken by this plugin innermost among the report hooks, before any other
hook (a repository's `conftest.py`, say) can change the report; and `outcome`, the report as
pytest logged it. The grader believes a run only where they agree. The last line is the
session's exit status and how many tests it collected, which the grader checks against the
process's exit code and the outcomes it received.
"""

import json
import os

import pytest

# bound when the plugin loads, before any repository code: a later patch of either does not
# change what is sent
_dumps = json.dumps
_write = os.write
_SKIP = pytest.skip.Exception
_XFAIL = pytest.xfail.Exception


class OutcomeStream:
    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._observed: dict[tuple[str, str], str] = {}

    def _send(self, record: dict) -> None:
        data = (_dumps(record) + "\n").encode("utf-8")
        while data:
            data = data[_write(self._fd, data) :]

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_makereport(self, item, call):
        self._observed[(item.nodeid, call.when)] = _observed(item, call)
        yield

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self._send({"test": report.nodeid, "when": "collect", "outcome": "failed"})

    def pytest_runtest_logreport(self, report) -> None:
        observed = self._observed.pop((report.nodeid, report.when), "unobserved")
        record = {"test": report.nodeid, "when": report.when, "outcome": report.outcome}
        self._send({**record, "observed": observed})

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        self._send({"exit": int(exitstatus), "collected": session.testscollected})


def _observed(item, call) -> str:
    """The phase's outcome from what its call raised: passed, skipped (a skip, or an expected
    failure of a test marked xfail) or failed."""
    if call.excinfo is None:
        return "passed"
    if call.excinfo.errisinstance((_SKIP, _XFAIL)):
        return "skipped"
    if call.when == "call" and item.get_closest_marker("xfail") is not None:
        return "skipped"
    return "failed"
