"""A repository tree's test suite, ready to run in a sandbox: its language's test runner
(pytest, or Node's test runner) with the dependencies the tree asks for, prepared once outside
the sandbox and shared read-only with every sandbox that runs it; and the calls its tests make
into the tree's own functions, recorded and replayed outside a test run (the outside check's
questions: `data.runtime.call_replay`, `data.runtime.node_calls`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .call_replay import Call, Replayed, record_calls, replay_calls
from .languages import Language, Python, tree_language
from .node_calls import record_node_calls, replay_node_calls
from .node_env import copies_in as node_copies_in
from .node_env import ensure_node_modules
from .node_runner import node_major, run_node_tests
from .pytest_runner import run_pytest
from .python_env import copies_in, ensure_env, requirements_of
from .sandbox import Limits, Sandbox
from .test_run import TestRun


@dataclass(frozen=True)
class TestSuite:
    """How to run a tree's tests: its language and the environment prepared for it (a Python
    virtualenv, or a `node_modules` folder; None: the project needs none)."""

    __test__ = False  # not a test class, whatever pytest makes of its name

    language: Language
    environment: Path | None

    def run(
        self, sandbox: Sandbox, tests: list[str] | None = None, timeout_s: float | None = None
    ) -> TestRun:
        """Run `tests` (default: the whole suite) in the sandbox's tree."""
        if self.language.runner == "node":
            return run_node_tests(sandbox, self.environment, tests, timeout_s)
        assert self.environment is not None  # a Python suite always has its virtualenv
        return run_pytest(sandbox, self.environment, tests, timeout_s)

    def record_calls(self, sandbox: Sandbox, tests: list[str]) -> list[Call]:
        """Run `tests` in the sandbox's tree, recording the calls they make into the tree's
        own functions."""
        if self.language.runner == "node":
            return record_node_calls(sandbox, self.environment, tests)
        assert self.environment is not None
        return record_calls(sandbox, self.environment, tests)

    def copies_in(self, tree: Path, modules: list[str]) -> list[str]:
        """Where the environment holds another copy of `modules` (the outside check's, of the
        project at `tree`), which an attempt could load and hand its calls to."""
        if self.environment is None:
            return []
        if self.language.runner == "node":
            return node_copies_in(self.environment, tree)
        return [path for module in modules for path in copies_in(self.environment, module)]

    def replay_calls(self, tree: Path, calls: list[Call], limits: Limits) -> Replayed:
        """Make `calls` on a copy of `tree` without its test files, outside any test run."""
        if self.language.runner == "node":
            return replay_node_calls(tree, self.environment, calls, limits)
        assert self.environment is not None
        return replay_calls(tree, self.environment, calls, limits)


def test_suite(tree: Path) -> TestSuite:
    """The test suite of the project at `tree` (Python where no language is recognised), its
    environment built first if need be; raises EnvError when it cannot be."""
    language = tree_language(tree) or Python()
    if language.runner == "node":
        node_major()  # raises EnvError where there is no Node to run them with
        return TestSuite(language, ensure_node_modules(tree))
    return TestSuite(language, ensure_env(requirements_of(tree)))
