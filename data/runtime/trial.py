"""A code attempt tried on a repository tree: in the sandbox, the start patch (what the solver
saw), then per step the solver's edits (test files set aside by the caller), the step's hidden
test patch and its tests. A step may also replay calls on the tree without its tests
(`data.runtime.call_replay`), after its edits (and before them), or record the calls its tests
make instead of running them for their outcomes.

It needs only the tree, not where the tree came from (taskfoundry checks it out of a mirror,
an exported package unpacks it), so it stands alone in an exported package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .call_replay import Call, Replayed
from .edits import Edits, apply_edits, apply_patch
from .sandbox import Completed, Limits, Sandbox
from .test_run import TestRun
from .test_runners import test_suite


class WorkspaceError(RuntimeError):
    """The task's own patches no longer apply: the workspace cannot be rebuilt."""


@dataclass(frozen=True)
class Trial:
    """An attempt's outcome: the edits did not apply (`rejected`, the failed command), or the
    test run, with the step's calls replayed after its edits (and before them), or the calls
    its tests made where it recorded them."""

    run: TestRun | None
    rejected: Completed | None = None
    replayed: Replayed | None = None
    replayed_before: Replayed | None = None
    recorded: list[Call] | None = None


@dataclass(frozen=True)
class Step:
    """One step of an attempt: its edits (None: nothing), then the test patch, then tests.

    `calls` are replayed on the tree without its tests after the edits (also before them
    with `replay_before`); with `record`, the tests' run records the calls they make (Python's
    and Node's alike) and is not believed for its outcomes; without
    `run_tests`, no test runs; where `decided` says the replay after the edits settles the
    step (it failed the outside check), no test runs and no later step is taken."""

    edits: Edits | None
    test_patch: str
    tests: list[str]
    calls: list[Call] | None = None
    replay_before: bool = False
    record: bool = False
    run_tests: bool = True
    decided: Callable[[Replayed | None], bool] | None = None


def steps_in_tree(tree: Path, start_patch: str, steps: list[Step], limits: Limits) -> list[Trial]:
    """Take `steps` in order on `tree` (a fresh copy of the task's base revision, which the
    sandbox copies again), after `start_patch`, each on the state the last one left; once a
    step's edits do not apply, the steps after it are not taken."""
    trials: list[Trial] = []
    suite = test_suite(tree)

    def replayed(sandbox: Sandbox, calls: list[Call] | None) -> Replayed | None:
        return suite.replay_calls(sandbox.tree, calls, limits) if calls else None

    with Sandbox(tree, limits) as sandbox:
        _own_patch(sandbox, "start.patch", start_patch)
        for index, step in enumerate(steps):
            before = replayed(sandbox, step.calls) if step.replay_before else None
            if step.edits is not None:
                rejected = apply_edits(sandbox, step.edits)
                if rejected is not None:
                    return [*trials, Trial(None, rejected)]
            after = replayed(sandbox, step.calls)
            if step.decided is not None and step.decided(after):
                return [*trials, Trial(None, None, after, before)]
            _own_patch(sandbox, f"tests-{index}.patch", step.test_patch)
            if step.record:
                trials.append(Trial(None, recorded=suite.record_calls(sandbox, step.tests)))
            elif not step.run_tests:
                trials.append(Trial(None, None, after, before))
            else:
                trials.append(Trial(suite.run(sandbox, step.tests), None, after, before))
    return trials


def _own_patch(sandbox: Sandbox, name: str, patch: str) -> None:
    failed = apply_patch(sandbox, name, patch)
    if failed is not None:
        raise WorkspaceError(f"{name} does not apply: {(failed.stderr or failed.stdout)[-300:]}")
