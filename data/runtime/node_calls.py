"""The calls a JavaScript or TypeScript repository's tests make into its own modules' exported
functions, recorded on one state of the tree and replayed on another, outside any test run: the
Node side of `data.runtime.call_replay` (same records, same wire, same values).

`record_node_calls` runs each test file with `node_boot/record.mjs` preloaded: the tree's
modules a test file imports or requires reach it through a facade that writes down each call of
an exported function, its arguments and its result. `replay_node_calls` makes those calls again,
in order, with `node_boot/replay.mjs` in a sandboxed `node` under the permission model, on a
copy of the tree from which every test file has been removed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from .call_replay import (
    MAX_CALLS,
    REPLAY_TIMEOUT_S,
    Call,
    Replayed,
    answers,
    questions_for,
    recorded_lines,
)
from .languages import is_any_test_file, project_files
from .node_runner import GUARD, NODE, NODE_INSTALL, confined, link_modules, runnable_test_files
from .sandbox import Completed, Limits, Sandbox
from .test_run import StreamReader

BOOT_FILES = [GUARD.parent / name for name in ("record.mjs", "replay.mjs", "values.mjs")]


def record_node_calls(sandbox: Sandbox, modules: Path | None, tests: list[str]) -> list[Call]:
    """Run the files of `tests` (ids; none: every test file) in the sandbox's tree with the
    recorder: the calls they made, file by file, in order."""
    tree = sandbox.tree
    files = sorted({test.split("::")[0] for test in tests}) if tests else runnable_test_files(tree)
    test_files = [str(tree / path) for path in project_files(tree) if is_any_test_file(path)]
    listed = sandbox.write("test-files.json", json.dumps(test_files))
    recorder = sandbox.provide("node-calls", BOOT_FILES) / "record.mjs"
    link_modules(tree, modules)
    calls: list[Call] = []
    for path in files:

        def command(fd: int, path: str = path) -> tuple[list[str], dict[str, str]]:
            argv = [NODE, "--no-warnings=ExperimentalWarning", "--import", recorder.as_uri(), path]
            return argv, {"FOUNDRY_RECORD_FD": str(fd), "FOUNDRY_TEST_FILES": str(listed)}

        calls += recorded_lines(*_piped(sandbox, command, modules))
        if len(calls) >= MAX_CALLS:
            break
    return calls[:MAX_CALLS]


def replay_node_calls(
    tree: Path, modules: Path | None, calls: list[Call], limits: Limits
) -> Replayed:
    """Make `calls` in order on a copy of `tree` without its test files: each one's result
    (None where the process ended before it)."""
    with Sandbox(tree, limits) as sandbox:
        listed = questions_for(sandbox, calls)
        link_modules(sandbox.tree, modules)
        boot = sandbox.provide("node-calls", BOOT_FILES)
        readable = (boot, *([modules.resolve()] if modules else []))

        def command(fd: int) -> tuple[list[str], dict[str, str]]:
            replay = str(boot / "replay.mjs")
            return [NODE, *confined(sandbox, readable), replay, str(fd), str(listed)], {}

        timeout_s = min(limits.wall_s, REPLAY_TIMEOUT_S)
        stream, completed = _piped(sandbox, command, modules, timeout_s)
    results, tampered = answers(stream, len(calls))
    return Replayed(results, completed.stderr, tampered, completed.timed_out)


def _piped(
    sandbox: Sandbox,
    command: Callable[[int], tuple[list[str], dict[str, str]]],
    modules: Path | None,
    timeout_s: float | None = None,
) -> tuple[bytes, Completed]:
    """Run `command(fd)` (its argv and environment, given the write end of a pipe) in the
    sandbox: what came down the pipe, and how the command ended."""
    read_end, write_end = os.pipe()
    reader = StreamReader(read_end)
    argv, variables = command(write_end)
    readable = (*([modules.resolve()] if modules else []), NODE_INSTALL)
    try:
        completed = sandbox.run(
            argv, env=variables, timeout_s=timeout_s, pass_fds=(write_end,), readable=readable
        )
    finally:
        os.close(write_end)
    return reader.collect(), completed
