"""The git command line, run with no user or system configuration (no hooks, aliases, signing
or prompts from the machine it runs on) and a clear error when it fails."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from data.lake import Commit

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's id of the empty tree
TIMEOUT_S = 600


class GitError(RuntimeError):
    """A git command failed; the message carries git's own last line."""


def git(repo: Path | None, *args: str, env: dict[str, str] | None = None) -> str:
    """Run `git -C repo args…` and return its stdout as text."""
    clean = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        **(env or {}),
    }
    where = ["-C", str(repo)] if repo is not None else []
    # objects from an untrusted origin are checked as they arrive
    checks = ["-c", "transfer.fsckObjects=true"]
    command = ["git", *checks, *where, *args]
    try:
        done = subprocess.run(
            command, capture_output=True, env=clean, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GitError(f"git {args[0]}: {error}") from error
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]}: {message[-1] if message else f'exit {done.returncode}'}")
    return done.stdout.decode("utf-8", "replace")


def checkout(mirror: Path, rev: str, dest: Path, tests_from: Commit | None = None) -> Path:
    """The tree of `rev` written to `dest` by git itself, through a throwaway index (git never
    writes through a symlinked folder, unlike archive extraction); with `tests_from`, the
    commit's test files as that commit has them (added, changed or removed)."""
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="foundry-index-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}

        def in_tree(*args: str) -> str:
            return git(mirror, f"--work-tree={dest}", *args, env=index)

        in_tree("read-tree", rev)
        for changed in tests_from.files if tests_from else []:
            if not changed.is_test:
                continue
            entry = git(mirror, "ls-tree", tests_from.sha, "--", changed.path).split()
            if entry:
                mode, _, blob = entry[:3]
                in_tree("update-index", "--add", "--cacheinfo", f"{mode},{blob},{changed.path}")
            else:
                in_tree("update-index", "--force-remove", "--", changed.path)
        in_tree("checkout-index", "--all")
    return dest
