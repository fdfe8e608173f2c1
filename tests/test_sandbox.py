"""The sandbox contains what it runs: no network, bounded time, memory and processes, no
writes outside its copy, no inherited secrets. Each test also shows the control case works."""

from __future__ import annotations

import os
import socket
import sys
import textwrap
import threading

import pytest

from harnesses.sandbox import Limits, Sandbox, _pids_of, network_isolation

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


def test_no_network(project):
    if not network_isolation():
        pytest.skip("no network namespace can be made on this machine")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
    try:
        with Sandbox(project) as sandbox:
            done = python(sandbox, connect)
        assert done.network_isolated and done.exit_code != 0
        assert "OSError" in done.stderr or "Error" in done.stderr
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # reachable outside
    finally:
        server.close()


def test_a_command_that_sleeps_forever_is_killed_at_its_time_limit(project):
    with Sandbox(project, Limits(wall_s=1.5)) as sandbox:
        done = python(sandbox, "import time; print('asleep', flush=True); time.sleep(10**6)")
        assert done.timed_out and not done.ok and "asleep" in done.stdout
        if sandbox.uid is not None:
            assert not _pids_of(sandbox.uid)


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
        assert not _pids_of(sandbox.uid)  # the sleepers it left were killed


@as_root
def test_writes_outside_the_copy_leave_the_original_untouched(project):
    attack = f"""
        open('data.txt', 'w').write('changed in the copy')
        try:
            open({str(project / "data.txt")!r}, 'w').write('changed the original')
        except PermissionError:
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
