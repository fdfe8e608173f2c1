"""The calls a Python repository's tests make into its own functions, recorded on one state of
the tree and replayed on another, outside any test run.

`record_calls` runs the tests with `pytest_boot/record.py`: each call made straight from a
test file's code into a module-level function of the tree, with its arguments and its result.
`replay_calls` makes those calls again, in order, in a sandboxed process on a copy of a tree
from which every test file has been removed: the code there sees the arguments, never the
tests, their expected values or the results it is compared with (`data.runtime.outside_check`).
A tree that is not a Python project has no calls to record (an empty list).

The replay's pipe carries one answer per call, in order: `{"i": n}` with exactly one of
`returns` (a value), `raises` (the classes of the exception, most derived first) or `missing`
(why the call could not be made). The attempt's code runs in the replaying process and can
write to that pipe too, so a stream that is anything else (a record with two answers, one out
of order or repeated, a line that is not a record) is tampering: the replay is judged by that
alone (`Replayed.tampered`), whatever its results say.
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
Result = dict[str, Any]  # exactly one of: returns | raises | missing
ANSWERS = frozenset({"returns", "raises", "missing"})
REPLAY_TIMEOUT_S = 120.0
MAX_CALLS = 400  # recorded per test run: enough to see a function's behaviour, bounded cost


@dataclass(frozen=True)
class Replayed:
    """The results of a replay, by call (None: the process ended before it), what the
    process wrote to its standard error (the red team's evidence that an attack ran), why its
    stream is not the replayer's own ("" where it is), and whether it was stopped at its time
    limit."""

    results: list[Result | None]
    stderr: str
    tampered: str = ""
    timed_out: bool = False


class ReplayError(RuntimeError):
    """The record or the replay did not finish (timed out, killed, unreadable stream)."""


def record_calls(sandbox: Sandbox, env: Path, tests: list[str]) -> list[Call]:
    """Run `tests` in the sandbox's tree with `record.py`: the calls they made, in order."""
    files = [path for path in project_files(sandbox.tree) if is_any_test_file(path)]
    listed = sandbox.write("test-files.json", json.dumps(files))
    args = [str(listed), "--", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    args += [f"--rootdir={sandbox.tree}", f"--confcutdir={sandbox.tree}"]
    stream, completed = run_boot_script(sandbox, env, "record.py", args)
    return recorded_lines(stream, completed)[:MAX_CALLS]


def replay_calls(tree: Path, env: Path, calls: list[Call], limits: Limits) -> Replayed:
    """Make `calls` in order on a copy of `tree` without its test files: each one's result
    (None where the process ended before it)."""
    with Sandbox(tree, limits) as sandbox:
        listed = questions_for(sandbox, calls)
        stream, completed = run_boot_script(
            sandbox, env, "replay.py", [str(listed)], min(limits.wall_s, REPLAY_TIMEOUT_S)
        )
    results, tampered = answers(stream, len(calls))
    return Replayed(results, completed.stderr, tampered, completed.timed_out)


def questions_for(sandbox: Sandbox, calls: list[Call]) -> Path:
    """Ready the sandbox to replay `calls`: every test file removed from its tree, and the
    calls' inputs (never their results) written to the file the replay reads, returned."""
    for path in project_files(sandbox.tree):
        if is_any_test_file(path):
            (sandbox.tree / path).unlink()
    inputs = [{k: call[k] for k in ("module", "function", "args", "kwargs")} for call in calls]
    return sandbox.write("calls.json", json.dumps(inputs))


def answers(stream: bytes, count: int) -> tuple[list[Result | None], str]:
    """The answers of a replay of `count` calls read from its `stream`, and why the stream is
    tampered with (its first line that is not the answer to its call; "" where none). A last
    line without its newline was cut off by the process's end: the calls from it on have no
    answer."""
    results: list[Result | None] = [None] * count
    tampered = ""
    *lines, _cut_off = stream.split(b"\n")
    for number, line in enumerate(lines):
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        why = _not_an_answer(record, number, count)
        if why and not tampered:
            tampered = f"line {number + 1} of the replay's stream: {why}"
        if isinstance(record, dict) and record.get("i") == number and number < count:
            results[number] = {k: v for k, v in record.items() if k != "i"}
    return results, tampered


def _not_an_answer(record: object, number: int, count: int) -> str:
    """Why `record`, the stream's line `number`, is not the answer to call `number`, or ""."""
    if not isinstance(record, dict):
        return "not a record"
    if type(record.get("i")) is not int or record["i"] != number or number >= count:
        return f"not the answer to call {number}"
    given = set(record) - {"i"}
    if len(given) != 1 or not given <= ANSWERS:
        return f"{len(given & ANSWERS)} answers and {len(given - ANSWERS)} other fields"
    raised = record.get("raises", [])
    if not isinstance(raised, list) or not all(isinstance(name, str) for name in raised):
        return "an exception that is not a list of class names"
    if "missing" in record and not isinstance(record["missing"], str):
        return "a missing call without its reason"
    return ""


def recorded_lines(stream: bytes, completed: Completed) -> list[dict[str, Any]]:
    """The JSON lines of a recording's `stream`; raises ReplayError where the run did not end
    well or a line is not a record."""
    records = []
    for line in stream.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            raise ReplayError(f"not a record: {line[:200]!r}")
        records.append(record)
    if completed.timed_out or completed.exit_code not in (0, 1):
        last = (completed.stderr or completed.stdout).strip().splitlines()[-1:]
        how = "timed out" if completed.timed_out else f"exited {completed.exit_code}"
        raise ReplayError(f"recording {how}: {last[0] if last else 'no output'}"[:300])
    return records
