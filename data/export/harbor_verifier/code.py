"""Grade the repository tree an agent left as taskfoundry grades a code attempt.

The attempt is what the agent changed: its tree (`/app`, restored in this separate verifier
container) against the tree it started from (`start.tar.gz`), as a unified diff
(`runtime/tree_diff.py`). That reply is graded by `runtime/code_grading.py` exactly as
taskfoundry's `unit_tests` verifier grades one: on a fresh copy of the repository at its base
revision (the workspace bundle beside this package), in taskfoundry's sandbox runtime, the
start patch, the reply's edits (test files set aside), the hidden test patch, then every
fail-to-pass test must pass and every pass-to-pass test keep passing, and the outside check
(the tests' calls into the changed functions, replayed without the tests) must find the
reference's results. `task.json` holds the start patch and, per checkpoint (one; a commit
sequence has one per step), the reference change, the hidden test patch and the tests.

Usage, from the folder holding `task.json` (Harbor's `/tests`):
    python3 -m foundry_verifier.code --prepare                      # build the tests' environment
    python3 -m foundry_verifier.code --checkpoint K ATTEMPT LOGS    # grade, write the reward
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .reward import write_outcome
from .runtime.code_grading import Point, grade, outside_checks
from .runtime.sandbox import Limits
from .runtime.test_runners import test_suite
from .runtime.tree_diff import tree_diff
from .runtime.trial import Step, Trial, steps_in_tree
from .runtime.workspace_bundle import unpack

TESTS = Path(__file__).resolve().parent.parent
TASK = TESTS / "task.json"
START = TESTS / "start.tar.gz"  # the tree the agent started from


def graded(task: dict[str, Any], checkpoint: dict[str, Any], attempt: Path) -> dict[str, Any]:
    """The reward of the tree `attempt` at `checkpoint` of `task`, why, and the paths set aside."""
    with tempfile.TemporaryDirectory(prefix="foundry-start-") as scratch:
        reply, set_aside = tree_diff(unpack(START, Path(scratch) / "start"), attempt)
    reference = checkpoint["reference"]
    points = [
        Point(checkpoint["test_patch"], checkpoint["fail_to_pass"], checkpoint["pass_to_pass"])
    ]

    def tried(steps: list[Step]) -> list[Trial]:
        with tempfile.TemporaryDirectory(prefix="foundry-workspace-") as scratch:
            tree = unpack(TESTS / task["bundle"], Path(scratch) / "tree")
            return steps_in_tree(tree, task["start_patch"], steps, Limits())

    # an attempt without edits scores 0 before any check is asked: none is made for it
    checks = outside_checks(reference, points, tried) if reply else [None]
    reward, why = grade(reply, reference, points, tried, checks)
    return {"reward": reward, "why": why, "set_aside": set_aside}


def prepare(task: dict[str, Any]) -> None:
    """Build the environment the repository's tests run in (while the image is built, with a
    network), where grading finds it offline."""
    with tempfile.TemporaryDirectory(prefix="foundry-workspace-") as scratch:
        test_suite(unpack(TESTS / task["bundle"], Path(scratch) / "tree"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="foundry_verifier.code", description=__doc__)
    parser.add_argument("--prepare", action="store_true", help="build the tests' environment")
    parser.add_argument("--checkpoint", type=int, default=1, help="which checkpoint (from 1)")
    parser.add_argument("attempt", nargs="?", type=Path, help="the agent's repository tree")
    parser.add_argument("logs", nargs="?", type=Path, help="where the reward is written")
    args = parser.parse_args(argv)
    task = json.loads(TASK.read_text())
    if args.prepare:
        prepare(task)
        return 0
    if args.attempt is None or args.logs is None:
        parser.error("ATTEMPT and LOGS are needed to grade")
    outcome = graded(task, task["checkpoints"][args.checkpoint - 1], args.attempt)
    write_outcome(args.logs, checkpoint=args.checkpoint, **outcome)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
