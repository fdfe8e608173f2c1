"""The sandbox runtime: code from an ingested repository runs here and nowhere else.

A `Sandbox` is a throwaway copy of a source tree in which commands run
- as a uid of their own, with no capabilities and no supplementary groups (`setpriv`), so they
  cannot write the original tree, the lake or anything else that is not theirs, and the
  process-count limit binds (it never binds root). No account is needed: each open sandbox
  takes a free uid from a pool, so concurrent sandboxes never share a process count. A caller
  that is not root is already unprivileged and runs commands as itself;
- in a network namespace of their own (`unshare -n`, or `unshare -rn` without root), where
  nothing but a loopback that is down exists. Where no namespace can be made the command runs
  with the network, the result says so and a warning is logged every time;
- under rlimits (`prlimit`): address space, processes, file size, no core dumps;
- within a wall-time limit: the command's session is killed, then any process of the uid left;
- with a scrubbed environment: PATH, HOME and TMPDIR inside the sandbox, LANG, nothing inherited
  (no API keys, no proxies).
Output goes to files (a child that holds a pipe open cannot hang the caller) and comes back
truncated to its last `output_chars`.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import grp
import logging
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

log = logging.getLogger(__name__)

UID_BASE = 64000  # sandbox uids: UID_BASE .. UID_BASE + UID_SLOTS - 1, minus real accounts
UID_SLOTS = 64
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
# The tools that confine a command, by absolute path: a command's PATH (which may hold a
# repository's environment) must never choose what root executes.
TOOLS = {
    name: shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin") or name
    for name in ("prlimit", "unshare", "setpriv")
}


def private_dir(path: Path, mode: int) -> Path:
    """`path` as a folder of this user's own (created with `mode`): never a symlink or a
    folder another user made, which could redirect what root writes there."""
    path.mkdir(mode=mode, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise RuntimeError(f"{path} is not a folder of uid {os.geteuid()}")
    os.chmod(path, mode)
    return path


def _lock_dir() -> Path:
    return private_dir(Path(tempfile.gettempdir()) / f"foundry-sandbox-uids-{os.geteuid()}", 0o700)


def _base_dir() -> Path:
    return private_dir(Path(tempfile.gettempdir()) / f"foundry-sandboxes-{os.geteuid()}", 0o711)


@dataclass(frozen=True)
class Limits:
    wall_s: float = 300.0
    memory_mb: int = 2048  # address space of each process
    processes: int = 64  # processes and threads of the sandbox's uid
    file_mb: int = 512  # largest file a process may write
    output_chars: int = 20_000


@dataclass(frozen=True)
class Completed:
    """How a command ended: exit code (negative: killed by that signal), output tails."""

    argv: list[str]
    exit_code: int
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool
    network_isolated: bool

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@functools.cache
def network_isolation() -> list[str]:
    """The prefix that gives a command a network namespace of its own, or [] if none can be
    made here (checked once per process)."""
    for prefix in ([TOOLS["unshare"], "-n"], [TOOLS["unshare"], "-rn"]):
        try:
            probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return prefix
    return []


@dataclass
class Sandbox:
    """A throwaway copy of `source` (`tree`) with commands run under `limits`. Use as a
    context manager: leaving it kills what is left and deletes the copy."""

    source: Path
    limits: Limits = field(default_factory=Limits)
    base: Path | None = None  # where copies are made (default: the temp dir)
    root: Path = field(init=False)
    tree: Path = field(init=False)
    uid: int | None = field(init=False, default=None)
    _lock: int | None = field(init=False, default=None)

    def __enter__(self) -> Sandbox:
        if os.geteuid() == 0:
            self.uid, self._lock = _take_uid()
        try:
            # the root folder stays root's: the command cannot swap the files root reads there
            self.root = Path(tempfile.mkdtemp(prefix="sandbox-", dir=self.base or _base_dir()))
            os.chmod(self.root, 0o755)
            self.tree = self.root / "tree"
            shutil.copytree(self.source, self.tree, symlinks=True)
            for folder in ("home", "tmp"):
                (self.root / folder).mkdir()
            if self.uid is not None:
                for folder in ("tree", "home", "tmp"):
                    _chown_tree(self.root / folder, self.uid)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.uid is not None:
            _kill_uid(self.uid)
        if hasattr(self, "root"):
            shutil.rmtree(self.root, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def write(self, name: str, data: str | bytes) -> Path:
        """A file in the sandbox's own tmp folder (outside the tree), owned by its uid."""
        path = self.root / "tmp" / name
        path.unlink(missing_ok=True)  # whatever the command left there, a symlink included
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            if self.uid is not None:
                os.fchown(handle.fileno(), self.uid, self.uid)
        return path

    def run(
        self,
        argv: list[str],
        cwd: str = ".",
        env: dict[str, str] | None = None,
        timeout_s: float | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> Completed:
        """Run `argv` in the copy (`cwd` relative to it), with `env` added to the scrubbed
        environment, within `timeout_s` (default: the limits' wall time); the command inherits
        `pass_fds` (e.g. the write end of a pipe the caller reads)."""
        isolation = network_isolation()
        if not isolation:
            log.warning("sandbox: no network namespace available; %s runs WITH network", argv[0])
        command = [*self._limits_prefix(), *isolation, *self._user_prefix(), *argv]
        out_path, err_path = self.root / "stdout", self.root / "stderr"
        started = time.monotonic()
        timed_out = False
        with out_path.open("wb") as out, err_path.open("wb") as err:
            process = subprocess.Popen(
                command,
                cwd=self.tree / cwd,
                env=self._environment(env or {}),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                pass_fds=pass_fds,
            )
            try:
                process.wait(timeout=timeout_s or self.limits.wall_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_session(process.pid)
                process.wait()
        if self.uid is not None:
            _kill_uid(self.uid)  # what the command left behind, escaped sessions included
        return Completed(
            argv=list(argv),
            exit_code=process.returncode,
            stdout=_tail(out_path, self.limits.output_chars),
            stderr=_tail(err_path, self.limits.output_chars),
            wall_s=time.monotonic() - started,
            timed_out=timed_out,
            network_isolated=bool(isolation),
        )

    def _limits_prefix(self) -> list[str]:
        mb = 1024 * 1024
        return [
            TOOLS["prlimit"],
            f"--as={self.limits.memory_mb * mb}",
            f"--nproc={self.limits.processes}",
            f"--fsize={self.limits.file_mb * mb}",
            "--core=0",
            "--",
        ]

    def _user_prefix(self) -> list[str]:
        if self.uid is None:
            return []
        return [
            TOOLS["setpriv"],
            f"--reuid={self.uid}",
            f"--regid={self.uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]

    def _environment(self, extra: dict[str, str]) -> dict[str, str]:
        home, tmp = str(self.root / "home"), str(self.root / "tmp")
        user = f"sandbox{self.uid}" if self.uid is not None else "sandbox"
        base = {
            "PATH": SAFE_PATH,
            "HOME": home,
            "TMPDIR": tmp,
            "USER": user,
            "LOGNAME": user,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "GIT_CEILING_DIRECTORIES": str(self.root),  # no repository above the copy
        }
        return {**base, **extra}


def _take_uid() -> tuple[int, int]:
    """A uid no other open sandbox on this machine holds and no account or group has, and
    the lock that holds it."""
    locks = _lock_dir()
    for slot in range(UID_SLOTS):
        uid = UID_BASE + slot
        if _has_account(uid):
            continue
        fd = os.open(locks / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _kill_uid(uid)  # a crashed holder's leftovers
        return uid, fd
    raise RuntimeError(f"all {UID_SLOTS} sandbox uids are in use")


def _has_account(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def _chown_tree(root: Path, uid: int) -> None:
    os.chown(root, uid, uid, follow_symlinks=False)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)


def _kill_session(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _kill_uid(uid: int) -> None:
    """SIGKILL every process whose real uid is `uid`, until none is left (a fork bomb keeps
    forking between two passes)."""
    for _ in range(50):
        victims = _pids_of(uid)
        if not victims:
            return
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    log.warning("sandbox: processes of uid %d survived 50 kill passes", uid)


def _pids_of(uid: int) -> list[int]:
    """Live processes (zombies aside: they are gone but for their parent's wait) of `uid`."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path("/proc", entry, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
            pids.append(int(entry))
    return pids


def _tail(path: Path, chars: int) -> str:
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - chars * 4))
        text = handle.read().decode("utf-8", errors="replace")
    return text[-chars:]
