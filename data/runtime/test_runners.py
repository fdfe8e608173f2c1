"""A repository tree's test suite, ready to run in a sandbox: its language's test runner
(pytest, or Node's test runner) with the dependencies the tree asks for, prepared once outside
the sandbox and shared read-only with every sandbox that runs it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .languages import Language, Python, tree_language
from .node_env import ensure_node_modules
from .node_runner import node_major, run_node_tests
from .pytest_runner import run_pytest
from .python_env import ensure_env, requirements_of
from .sandbox import Sandbox
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
        if self.language.name == "javascript":
            return run_node_tests(sandbox, self.environment, tests, timeout_s)
        assert self.environment is not None  # a Python suite always has its virtualenv
        return run_pytest(sandbox, self.environment, tests, timeout_s)


def test_suite(tree: Path) -> TestSuite:
    """The test suite of the project at `tree` (Python where no language is recognised), its
    environment built first if need be; raises EnvError when it cannot be."""
    language = tree_language(tree) or Python()
    if language.name == "javascript":
        node_major()  # raises EnvError where there is no Node to run them with
        return TestSuite(language, ensure_node_modules(tree))
    return TestSuite(language, ensure_env(requirements_of(tree)))
