"""Run a Python repository's tests with pytest inside a sandbox and read each test's outcome.

Outcomes come from pytest's JUnit XML report (written inside the sandbox), keyed by pytest's
own test ids (`tests/test_x.py::TestCase::test_name[param]`): passed, failed, error, skipped.
"""

from __future__ import annotations

import os
import stat
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from harnesses.sandbox import Completed, Sandbox

Outcome = str  # passed | failed | error | skipped
MAX_REPORT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class TestRun:
    outcomes: dict[str, Outcome]
    completed: Completed

    def passed(self) -> set[str]:
        return {test for test, outcome in self.outcomes.items() if outcome == "passed"}


def run_pytest(
    sandbox: Sandbox, env: Path, tests: list[str] | None = None, timeout_s: float | None = None
) -> TestRun:
    """Run `tests` (default: the whole suite) in the sandbox's tree with `env`'s pytest."""
    report = sandbox.root / "tmp" / "pytest-report.xml"
    report.unlink(missing_ok=True)
    argv = [
        str(env / "bin" / "python"),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",  # a test module that cannot import fails alone
        f"--rootdir={sandbox.tree}",  # no config or conftest from above the copy
        f"--confcutdir={sandbox.tree}",
        "-o",
        "junit_family=xunit1",
        f"--junitxml={report}",
        *(tests or []),
    ]
    paths = [str(sandbox.tree / "src"), str(sandbox.tree)]
    variables = {"PYTHONPATH": ":".join(paths), "PATH": f"{env / 'bin'}:/usr/bin:/bin"}
    completed = sandbox.run(argv, env=variables, timeout_s=timeout_s)
    return TestRun(read_report(report), completed)


def read_report(report: Path) -> dict[str, Outcome]:
    """Each test case of a JUnit XML report (xunit1, with `file` attributes) and its outcome;
    a missing, oversized or unreadable report, or anything but a plain file, has none."""
    try:
        fd = os.open(report, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_REPORT_BYTES:
            return {}
        try:
            root = ElementTree.fromstring(handle.read())
        except ElementTree.ParseError:
            return {}
    outcomes: dict[str, Outcome] = {}
    for case in root.iter("testcase"):
        outcomes[_test_id(case)] = _outcome(case)
    return outcomes


def _test_id(case: ElementTree.Element) -> str:
    name, classname, file = case.get("name", ""), case.get("classname", ""), case.get("file")
    if not file:
        return f"{classname}::{name}" if classname else name
    module = file.removesuffix(".py").replace("/", ".")
    inner = classname.removeprefix(module).lstrip(".") if classname.startswith(module) else ""
    inner = inner.replace(".", "::")  # nested classes
    return "::".join(part for part in (file, inner, name) if part)


def _outcome(case: ElementTree.Element) -> Outcome:
    for child, outcome in (("error", "error"), ("failure", "failed"), ("skipped", "skipped")):
        if case.find(child) is not None:
            return outcome
    return "passed"
