"""Run the reference's tests and write down each call they make into the repository's own
functions, for the grader to replay later on an attempt, outside any test run.

Run by the sandboxed interpreter as `python -s -S record.py FD SITE_PACKAGES PATHS TEST_FILES
-- ARGS`: FD is the write end of the grader's pipe, TEST_FILES a JSON list of the tree's test
files (relative to the working folder, the tree). Once the tests are collected, every
module-level function defined in a module of the tree that is not a test file is replaced, in
every module of the tree, by a wrapper; a call made straight from a test file's code (a test,
a fixture, a helper of theirs) is written down the pipe as one JSON line: the test, the
function (`module`, `function`), its arguments in the form `values.decode` rebuilds, and what
it returned (`values.encode`) or the classes of what it raised. A call whose arguments could
not be rebuilt in another process (an open file, a lambda) is not written.

This runs the reference, which has no reason to forge its own record: there is no guard here.
"""

import functools
import json
import os
import sys
from types import FunctionType, ModuleType


def main(argv: list[str]) -> int:
    fd, site_packages, paths, test_files, separator, *args = argv
    if separator != "--":
        raise SystemExit("usage: record.py FD SITE_PACKAGES PATHS TEST_FILES -- PYTEST_ARGS")
    stream_fd = int(fd)
    os.set_inheritable(stream_fd, False)
    here = os.path.dirname(os.path.abspath(__file__))
    # this folder, then the test environment's packages; the interpreter put this folder
    # first (no -P: Python 3.10 has none): it leaves before the repository's paths come
    sys.path[:] = [here, site_packages, *(p for p in sys.path if p != here)]
    import pytest
    import values

    sys.path[:] = [p for p in sys.path if p != here]
    sys.path[:0] = [p for p in paths.split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = paths  # for the processes the tests start
    with open(test_files, encoding="utf-8") as handle:
        tests = frozenset(os.path.abspath(path) for path in json.load(handle))
    recorder = Recorder(stream_fd, os.getcwd(), tests, values)
    return int(pytest.main(args, plugins=[recorder]))


class Recorder:
    """The pytest plugin: wraps the tree's functions once collection is done."""

    def __init__(self, fd: int, tree: str, test_files: frozenset[str], values: ModuleType):
        self.fd, self.tree, self.test_files, self.values = fd, tree + os.sep, test_files, values
        self.test = ""

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.test = nodeid

    def pytest_collection_finish(self) -> None:
        in_tree = [m for m in list(sys.modules.values()) if self._file(m)]
        wrappers: dict[int, tuple[FunctionType, FunctionType]] = {}
        for module in in_tree:
            if self._file(module) in self.test_files:
                continue
            for name, value in list(vars(module).items()):
                defined = type(value) is FunctionType and value.__module__ == module.__name__
                if defined and value.__qualname__ == name:
                    wrappers[id(value)] = (value, self._wrap(value, module.__name__, name))
        for module in in_tree:
            for name, value in list(vars(module).items()):
                original, wrapper = wrappers.get(id(value), (None, None))
                if original is value:
                    setattr(module, name, wrapper)

    def _file(self, module: ModuleType) -> str:
        """The module's file where it is one of the tree's, else ""."""
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            return ""
        path = os.path.abspath(path)
        return path if path.startswith(self.tree) else ""

    def _wrap(self, function: FunctionType, module: str, name: str) -> FunctionType:
        values, frame, tests = self.values, sys._getframe, self.test_files

        @functools.wraps(function)
        def observed(*args, **kwargs):
            if frame(1).f_code.co_filename not in tests:
                return function(*args, **kwargs)
            try:
                inputs = values.encode(args, True), values.encode(kwargs, True)
            except (values.Unrebuildable, RecursionError):
                return function(*args, **kwargs)
            call = {"test": self.test, "module": module, "function": name}
            call.update(args=inputs[0], kwargs=inputs[1])
            try:
                result = function(*args, **kwargs)
            except Exception as error:
                self._write({**call, "raises": raised(error, values)})
                raise
            try:
                self._write({**call, "returns": values.encode(result)})
            except Exception as error:  # a result that would not encode
                self._write({**call, "returns": {"opaque": repr(type(error))}})
            return result

        return observed

    def _write(self, record: dict) -> None:
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.fd, data) :]


def raised(error: BaseException, values: ModuleType) -> list[str]:
    """The classes of `error`, most derived first, down to (not including) Exception."""
    common = (Exception, BaseException, object)
    return [values.class_name(c) for c in type(error).__mro__ if c not in common]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
