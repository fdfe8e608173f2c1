"""Virtual environments for ingested Python repositories: one per set of dependencies, built
once, then shared read-only by every sandbox that runs that repository's tests.

Only wheels are installed (`--only-binary=:all:`), so installing runs none of the packages'
code; the repository itself is never installed, its tree goes on PYTHONPATH. Environments live
under a folder every sandbox uid can read (`env_cache()`), keyed by the interpreter and the
requirements; one being built is locked, and one whose build died is rebuilt.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from data.records import content_id

TEST_EXTRAS = ("test", "tests", "testing", "dev")
REQUIREMENT_FILES = (
    "requirements.txt",
    "requirements-test.txt",
    "requirements-dev.txt",
    "test-requirements.txt",
    "requirements/test.txt",
)
BUILD_TIMEOUT_S = 900


class EnvError(RuntimeError):
    """The environment could not be built; `detail` holds the installer's last words."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def sandbox_python() -> str:
    """An interpreter every uid can run: the system's, else this one's base interpreter."""
    system = Path("/usr/bin/python3")
    return str(system) if system.exists() else getattr(sys, "_base_executable", sys.executable)


def env_cache() -> Path:
    return Path(tempfile.gettempdir()) / f"foundry-envs-{os.geteuid()}"


def requirements_of(tree: Path) -> list[str]:
    """What the repository says it needs to run its tests, plus pytest: `[project]`
    dependencies and test extras from pyproject.toml, and plain requirement files (editable,
    URL and option lines are left out: they would build or fetch code)."""
    found: list[str] = []
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            project = {}
        found += project.get("dependencies", [])
        extras = project.get("optional-dependencies", {})
        for extra in TEST_EXTRAS:
            found += extras.get(extra, [])
    for name in REQUIREMENT_FILES:
        path = tree / name
        if path.is_file():
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                line = line.split("#", 1)[0].strip()
                if line and not line.startswith("-") and "://" not in line and " @ " not in line:
                    found.append(line)
    found.append("pytest")
    return list(dict.fromkeys(r for r in found if _is_requirement(r)))


def _is_requirement(text: str) -> bool:
    return re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*", text) is not None


def ensure_env(requirements: list[str], python: str | None = None) -> Path:
    """The environment with `requirements` installed, built now if it does not exist yet."""
    python = python or sandbox_python()
    cache = env_cache()
    cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    env = cache / content_id("python-env", python, sorted(requirements))
    with open(cache / f"{env.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (env / ".ready").exists():
            return env
        shutil.rmtree(env, ignore_errors=True)  # a build that died half-way
        _build(env, python, requirements)
        (env / ".ready").write_text("\n".join(requirements) + "\n")
    return env


def _build(env: Path, python: str, requirements: list[str]) -> None:
    steps = [
        [python, "-m", "venv", str(env)],
        [
            str(env / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "--only-binary=:all:",
            *requirements,
        ],
    ]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise EnvError(f"{step[2]}: {error}") from error
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise EnvError(" | ".join(tail) or f"exit {done.returncode}")
