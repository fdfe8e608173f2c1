"""A pytest plugin that sends each test's outcome to the grader as the test finishes.

One JSON line per event, written to a pipe the grader reads outside the sandbox: a line, once
written, cannot be taken back by code that runs later (an `atexit` hook, a rewritten report
file). For each test phase the grader gets what was observed, then what was reported:
- `observed` by the test function's call: whether the function raised, seen by this plugin's
  `pytest_pyfunc_call` wrapper, the innermost around the call, so no patch of pytest's runner,
  `CallInfo` or reports lies between the function and this view;
- `observed` by the report: what the phase's `CallInfo` says it raised, taken by this plugin
  innermost among the report hooks, before any other hook (a repository's `conftest.py`, say)
  can change the report; it says whether the item runs a test function (a plain `Function`),
  whose call the grader then expects to have seen;
- the `outcome`, the report as pytest logged it.
The grader believes a run only where they agree. The last line is the session's exit status
and how many tests it collected, which the grader checks against the process's exit code and
the outcomes it received.

The code under test shares this process, so every object here could be patched. Everything the
hooks call is bound as a default argument when this module loads, before any code of the
repository's runs (the boot script's audit hook refuses new code or defaults for these
functions), and no hook keeps state between calls. The namespaces of pytest's and pluggy's
modules and classes, this module's and the session's hook callers are pinned with the audit
hook (`pytest_load_initial_conftests`), which compares them whenever a test's call is reported
and when the session ends: any replacement is sent as tampering.
"""

import os
import sys
from importlib import import_module
from json.encoder import encode_basestring_ascii

import _pytest.nodes
import _pytest.python
import pytest

# pytest's modules a test's run, report and verdict go through
PYTEST_MODULES = (
    "_pytest.main",
    "_pytest.nodes",
    "_pytest.outcomes",
    "_pytest.python",
    "_pytest.reports",
    "_pytest.runner",
    "_pytest.skipping",
)
# the hooks a test's run and report go through, whose callers are pinned in the session
HOOKS = (
    "pytest_runtest_protocol",
    "pytest_runtest_call",
    "pytest_pyfunc_call",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_collectreport",
    "pytest_sessionfinish",
)


def _send(
    fd: int,
    fields: tuple[tuple[str, object], ...],
    check: bool = False,
    _write=os.write,
    _encode=encode_basestring_ascii,
    _audit=sys.audit,
    _str=str,
    _type=type,
) -> None:
    """One line down the pipe; with `check`, after the audit hook has checked the pins (once
    per test and at the end: checking at every line would make a run of quick tests several
    times slower)."""
    if check:
        _audit("foundry.check")
    line = "{"
    for name, value in fields:
        text = _encode(value) if _type(value) is _str else _str(value)
        line += ("" if line == "{" else ", ") + _encode(name) + ": " + text
    data = (line + "}\n").encode("utf-8")
    while data:
        data = data[_write(fd, data) :]


def _observed(
    item: pytest.Item,
    raised: BaseException | None,
    when: str,
    _isinstance=isinstance,
    _skips=(pytest.skip.Exception, pytest.xfail.Exception),
    _closest_marker=_pytest.nodes.Node.get_closest_marker,
) -> str:
    """A phase's outcome from what it raised: passed, skipped (a skip, or an expected failure
    of a test marked xfail) or failed."""
    if raised is None:
        return "passed"
    if _isinstance(raised, _skips):
        return "skipped"
    if when == "call" and _closest_marker(item, "xfail") is not None:
        return "skipped"
    return "failed"


class OutcomeStream:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def pytest_load_initial_conftests(
        self, early_config: pytest.Config, _audit=sys.audit, _hooks=HOOKS
    ) -> None:
        """Pin the grader's modules and the session's hook machinery, then seal the pins:
        after pytest's own start-up patches (`legacypath`, a `tryfirst` implementation),
        before the first conftest is imported (a `trylast` one)."""
        _pin_modules()
        pluginmanager = early_config.pluginmanager
        _audit("foundry.pin", "the plugin", self, ())
        _audit("foundry.pin", "the plugin manager", pluginmanager, ("_inner_hookexec", "hook"))
        _audit("foundry.pin", "the hook relay", pluginmanager.hook, _hooks)
        for name in _hooks:
            caller = getattr(pluginmanager.hook, name)
            _audit("foundry.pin", f"the {name} caller", caller, ("_hookexec", "_hookimpls"))
            for impl in caller.get_hookimpls():
                if impl.plugin is self:
                    _audit("foundry.pin", f"the plugin's {name}", impl, ("function", "plugin"))
        _audit("foundry.seal")

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_pyfunc_call(
        self,
        pyfuncitem: pytest.Function,
        _send=_send,
        _observed=_observed,
        _raised=BaseException,
    ):
        test = ("test", pyfuncitem.nodeid)
        try:
            result = yield
        except _raised as raised:
            seen = _observed(pyfuncitem, raised, "call")
            _send(self.fd, (test, ("when", "call"), ("observed", seen), ("by", "function")))
            raise
        _send(self.fd, (test, ("when", "call"), ("observed", "passed"), ("by", "function")))
        return result

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_makereport(
        self,
        item: pytest.Item,
        call: pytest.CallInfo,
        _send=_send,
        _observed=_observed,
        _type=type,
        _getattr=getattr,
        _runtest=_pytest.python.Function.runtest,
    ):
        raised = None if call.excinfo is None else call.excinfo.value
        function = _getattr(_type(item), "runtest", None) is _runtest and call.when == "call"
        runs = "function" if function else "item"
        seen = _observed(item, raised, call.when)
        fields = (("test", item.nodeid), ("when", call.when), ("observed", seen))
        _send(self.fd, (*fields, ("by", "report"), ("runs", runs)))
        yield

    def pytest_collectreport(self, report: pytest.CollectReport, _send=_send) -> None:
        if report.failed:
            _send(self.fd, (("test", report.nodeid), ("when", "collect"), ("outcome", "failed")))

    def pytest_runtest_logreport(self, report: pytest.TestReport, _send=_send) -> None:
        fields = (("test", report.nodeid), ("when", report.when), ("outcome", report.outcome))
        _send(self.fd, fields, report.when == "call")

    def pytest_sessionfinish(
        self, session: pytest.Session, exitstatus: int, _send=_send, _int=int
    ) -> None:
        end = (("exit", _int(exitstatus)), ("collected", _int(session.testscollected)))
        _send(self.fd, end, True)


def _pin_modules(_audit=sys.audit) -> None:
    """Pin the namespaces of `PYTEST_MODULES`, pluggy's and this module, and of the classes
    they define."""
    grader = [import_module(name) for name in (__name__, *PYTEST_MODULES)]
    grader += [m for n, m in sys.modules.items() if n.split(".")[0] == "pluggy"]
    for module in grader:
        _audit("foundry.pin", module.__name__, module, ())
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                _audit("foundry.pin", f"{module.__name__}.{value.__qualname__}", value, ())
