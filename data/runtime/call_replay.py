"""The calls a Python repository's tests make into its own functions, recorded on one state of
the tree and replayed on another, outside any test run.

`record_calls` runs the tests with `pytest_boot/record.py`: each call made straight from a
test file's code into a module-level function of the tree, with its arguments and its result.
`replay_calls` makes those calls again, in order, in a sandboxed process on a copy of a tree
from which every test file has been removed: the code there sees the arguments, never the
tests, their expected values or the results it is compared with (`data.runtime.outside_check`).
A tree that is not a Python project has no calls to record (an empty list).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .languages import is_any_test_file, project_files
from .pytest_runner import run_boot_script
from .sandbox import Completed, Limits, Sandbox

Call = dict[str, Any]  # module, function, args, kwargs; as recorded: test, returns | raises
Result = dict[str, Any]  # returns | raises | missing
REPLAY_TIMEOUT_S = 120.0
MAX_CALLS = 400  # recorded per test run: enough to see a function's behaviour, bounded cost


@dataclass(frozen=True)
class Replayed:
    """The results of a replay, by call (None: the process ended before it), and what the
    process wrote to its standard error (the red team's evidence that an attack ran)."""

    results: list[Result | None]
    stderr: str


class ReplayError(RuntimeError):
    """The record or the replay did not finish (timed out, killed, unreadable stream)."""


def record_calls(sandbox: Sandbox, env: Path, tests: list[str]) -> list[Call]:
    """Run `tests` in the sandbox's tree with `record.py`: the calls they made, in order."""
    files = [path for path in project_files(sandbox.tree) if is_any_test_file(path)]
    listed = sandbox.write("test-files.json", json.dumps(files))
    args = [str(listed), "--", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    args += [f"--rootdir={sandbox.tree}", f"--confcutdir={sandbox.tree}"]
    stream, completed = run_boot_script(sandbox, env, "record.py", args)
    return _records(stream, completed)[:MAX_CALLS]


def replay_calls(tree: Path, env: Path, calls: list[Call], limits: Limits) -> Replayed:
    """Make `calls` in order on a copy of `tree` without its test files: each one's result
    (None where the process ended before it)."""
    inputs = [{k: call[k] for k in ("module", "function", "args", "kwargs")} for call in calls]
    with Sandbox(tree, limits) as sandbox:
        for path in project_files(sandbox.tree):
            if is_any_test_file(path):
                (sandbox.tree / path).unlink()
        listed = sandbox.write("calls.json", json.dumps(inputs))
        stream, completed = run_boot_script(
            sandbox, env, "replay.py", [str(listed)], min(limits.wall_s, REPLAY_TIMEOUT_S)
        )
    results: list[Result | None] = [None] * len(calls)
    for record in _records(stream, completed, strict=False):
        number = record.get("i")
        if isinstance(number, int) and 0 <= number < len(calls) and results[number] is None:
            results[number] = {k: v for k, v in record.items() if k != "i"}
    return Replayed(results, completed.stderr)


def _records(stream: bytes, completed: Completed, strict: bool = True) -> list[dict[str, Any]]:
    """The JSON lines of `stream`; with `strict`, raises ReplayError where the run did not end
    well or a line is not a record (an attempt's replay is judged by its results instead)."""
    records = []
    for line in stream.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict):
            records.append(record)
        elif strict:
            raise ReplayError(f"not a record: {line[:200]!r}")
    if strict and (completed.timed_out or completed.exit_code not in (0, 1)):
        last = (completed.stderr or completed.stdout).strip().splitlines()[-1:]
        how = "timed out" if completed.timed_out else f"exited {completed.exit_code}"
        raise ReplayError(f"recording {how}: {last[0] if last else 'no output'}"[:300])
    return records
