"""Virtual environments for ingested Python repositories: one per set of dependencies, built
once, then shared read-only by every sandbox that runs that repository's tests.

Only wheels are installed (`--only-binary=:all:`), so installing runs none of the packages'
code; the repository itself is never installed, its tree goes on PYTHONPATH. The installer
itself (pip, setuptools, wheel) is removed once it is done: it carries copies of popular
packages (`pip/_vendor/`, `setuptools/_vendor/`) that an attempt could hand its calls to, and
`copies_in` finds any copy of a module that is still there (a dependency of pytest's, say).
Environments live under a folder every sandbox uid can read (`env_cache()`:
`foundry-envs-<uid>` in the temporary folder, or `FOUNDRY_ENV_CACHE`), keyed by the interpreter
and the requirements; one being built is locked, and one whose build died is rebuilt.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path

from .sandbox import SYSTEM_DIRS, private_dir

ENV_CACHE_VARIABLE = "FOUNDRY_ENV_CACHE"
ENV_LAYOUT = 2  # in every environment's key: 2 removes the installer after installing
INSTALLER = ("pip", "setuptools", "wheel")
VENDOR_FOLDERS = ("_vendor", "vendor", "_vendored", "extern", "_extern")
TEST_EXTRAS = ("test", "tests", "testing", "dev")
REQUIREMENT_FILES = (
    "requirements.txt",
    "requirements-test.txt",
    "requirements-dev.txt",
    "test-requirements.txt",
    "requirements/test.txt",
)
BUILD_TIMEOUT_S = 900
# name, optional [extras], optional version specifiers and a marker: no URL, path or option
PLAIN_REQUIREMENT = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._, -]*\])?\s*([<>=!~]=?\s*[\w.*+!-]+\s*,?\s*)*"
    r"(;[^@]*)?"
)


class EnvError(RuntimeError):
    """The environment could not be built; `detail` holds the installer's last words."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def sandbox_python() -> str:
    """An interpreter every uid can run: the system's, else this one's base interpreter."""
    system = Path("/usr/bin/python3")
    return str(system) if system.exists() else getattr(sys, "_base_executable", sys.executable)


def sandbox_python_version() -> str:
    """`X.Y` of `sandbox_python()`: what wheels for its environments must be built for (the
    Makefile downloads the sample repositories' test wheels for it)."""
    done = subprocess.run(
        [sandbox_python(), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def readable_paths(env: Path) -> tuple[Path, ...]:
    """What a sandboxed command needs to read to run `env`'s interpreter: the environment and
    the installation its interpreter links to (when that is not a system folder already)."""
    prefix = Path(os.path.realpath(env / "bin" / "python")).parent.parent
    system = any(prefix.is_relative_to(folder) for folder in SYSTEM_DIRS)
    return (env,) if system else (env, prefix)


def env_cache() -> Path:
    """The folder environments (and JavaScript dependencies) are built in."""
    chosen = os.environ.get(ENV_CACHE_VARIABLE)
    default = Path(tempfile.gettempdir()) / f"foundry-envs-{os.geteuid()}"
    return private_dir(Path(chosen) if chosen else default, 0o755)


def requirements_of(tree: Path) -> list[str]:
    """What the repository says it needs to run its tests, plus pytest: `[project]`
    dependencies and test extras from pyproject.toml, and plain requirement files. Only plain
    `name[extras] specifier` requirements are kept: a URL, path or option would build or fetch
    code outside the index. Symlinked files are not read (they could point anywhere)."""
    found: list[object] = []
    project = _toml(tree / "pyproject.toml").get("project", {})
    if isinstance(project, dict):
        found += _strings(project.get("dependencies"))
        extras = project.get("optional-dependencies")
        for extra in TEST_EXTRAS:
            found += _strings(extras.get(extra)) if isinstance(extras, dict) else []
    for name in REQUIREMENT_FILES:
        for line in _text(tree / name).splitlines():
            found.append(line.split("#", 1)[0].strip())
    found.append("pytest")
    return list(dict.fromkeys(r for r in found if isinstance(r, str) and _is_plain(r)))


def _is_plain(requirement: str) -> bool:
    return PLAIN_REQUIREMENT.fullmatch(requirement) is not None


def _strings(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _text(path: Path) -> str:
    if path.is_symlink() or not path.is_file():
        return ""
    return path.read_text(encoding="utf-8", errors="replace")


def _toml(path: Path) -> dict:
    try:
        return tomllib.loads(_text(path))
    except tomllib.TOMLDecodeError:
        return {}


def ensure_env(requirements: list[str], python: str | None = None) -> Path:
    """The environment with `requirements` installed, built now if it does not exist yet."""
    python = python or sandbox_python()
    cache = env_cache()
    env = cache / key_of("python-env", ENV_LAYOUT, python, sorted(requirements))
    ready = "\n".join(requirements) + "\n"
    return built_once(env, lambda folder: _build(folder, python, requirements), ready)


def built_once(folder: Path, build: Callable[[Path], None], ready: str) -> Path:
    """`folder` as `build` makes it, unless a finished build is there (its `.ready` file,
    which records `ready`): a build in progress elsewhere is waited for under a lock, and one
    that died half-way is done again."""
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".ready").exists():
            shutil.rmtree(folder, ignore_errors=True)
            build(folder)
            (folder / ".ready").write_text(ready)
    return folder


def run_installer(argv: list[str], what: str, cwd: Path | None = None) -> None:
    """Run an installer's command (`what` names it in errors); raises EnvError with its last
    words when it cannot run, times out or fails."""
    try:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise EnvError(f"{what}: {error}") from error
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise EnvError(" | ".join(tail) or f"{what}: exit {done.returncode}")


def key_of(*parts: object) -> str:
    """A stable name for `parts` (taskfoundry's content ids: canonical JSON, sha256 prefix),
    spelled out here so that this module stands alone in an exported package."""
    canonical = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


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
        [str(env / "bin" / "python"), "-m", "pip", "uninstall", "--quiet", "--yes", *INSTALLER],
    ]
    for step in steps:
        run_installer(step, step[2])


def site_packages(env: Path) -> Path:
    """The virtualenv's site-packages folder (`lib/pythonX.Y/site-packages`)."""
    found = sorted((env / "lib").glob("python3*/site-packages"))
    if not found:
        raise FileNotFoundError(f"no site-packages under {env / 'lib'}")
    return found[0]


def copies_in(env: Path, module: str) -> list[str]:
    """Where `env` holds a copy of the Python module `module` (dotted), as paths under its
    site-packages: the module's own path there, or under a folder a package vendors others
    into (`pip/_vendor/`, `a/b/_vendor/`). An attempt replayed beside such a copy could load
    it under another name and hand it every call."""
    site = site_packages(env)
    roots = [site]
    for folder in VENDOR_FOLDERS:
        roots += [*site.glob(f"*/{folder}"), *site.glob(f"*/*/{folder}")]
    parts = module.split(".")
    found = []
    for root in roots:
        base = root.joinpath(*parts)
        candidates = [base.with_name(base.name + ".py"), base / "__init__.py"]
        candidates += sorted(base.parent.glob(f"{base.name}.*.so"))
        found += [str(c.relative_to(site)) for c in candidates if c.is_file()]
    return found
