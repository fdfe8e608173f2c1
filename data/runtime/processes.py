"""The sandbox's processes: every process in /proc with its parent, real uid and PID-namespace
depth; killing a session or every process of a uid; and adopting and reaping what a sandbox
orphans (this process as their subreaper)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import signal
import time
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)


def kill_session(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def kill_uid(uid: int) -> None:
    """SIGKILL every process whose real uid is `uid`, until none is left (a fork bomb keeps
    forking between two passes)."""
    for _ in range(50):
        victims = [process.pid for process in running_processes() if process.uid == uid]
        if not victims:
            return
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    log.warning("sandbox: processes of uid %d survived 50 kill passes", uid)


PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>


@functools.cache
def adopt_orphans() -> None:
    """Make this process the subreaper of its descendants (once): a process a command orphans
    (bubblewrap's init, a sleeper that left its session) comes to this process, which reaps
    it, rather than to PID 1, which in a container often does not."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        log.warning("sandbox: cannot become a subreaper: %s", os.strerror(ctypes.get_errno()))


def reap_orphans(uid: int | None) -> None:
    """Kill and wait for what this process adopted from its sandboxes: children in a PID
    namespace below its own (bubblewrap's inits: this process never starts one itself) and,
    for root, children of the sandbox's `uid` (the commands it starts as `uid` have been
    waited for by then)."""
    me = os.getpid()
    processes = running_processes(include_zombies=True)
    depth = next(process.namespaces for process in processes if process.pid == me)
    for process in processes:
        if process.parent == me and (process.uid == uid or process.namespaces > depth):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(process.pid, 0)


class Process(NamedTuple):
    pid: int
    parent: int
    uid: int
    namespaces: int  # the PID namespaces it is seen from (its NSpid's length)


def running_processes(include_zombies: bool = False) -> list[Process]:
    """The processes in /proc (zombies only if asked: gone but for their parent's wait)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path("/proc", entry, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields["State"].strip().startswith("Z") and not include_zombies:
            continue
        uid = int(fields["Uid"].split()[0])
        namespaces = len(fields.get("NSpid", entry).split())
        found.append(Process(int(entry), int(fields["PPid"]), uid, namespaces))
    return found
