"""Dependencies of ingested JavaScript repositories: one `node_modules` folder per set of
dependencies, installed once from the npm registry, then shared read-only by every sandbox that
runs that repository's tests.

Installing runs none of the packages' code (`--ignore-scripts`), happens in a scratch folder
holding only `package.json` and the lockfile (a `.npmrc` of the repository is never read, and
neither is the user's), and is `npm ci` where a lockfile pins the versions. Folders live beside
the Python environments (`env_cache()`), keyed by Node's version, the declared dependencies and
the lockfile; one being built is locked, and one whose build died is built again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .node_runner import node_version, npm_command
from .python_env import EnvError, built_once, env_cache, key_of, run_installer

LOCKFILE = "package-lock.json"
DEPENDENCY_FIELDS = ("dependencies", "devDependencies")


def declared_dependencies(tree: Path) -> dict[str, str]:
    """The dependencies `package.json` declares (test tools among them: `devDependencies`);
    raises EnvError when it is not a JSON object."""
    manifest = tree / "package.json"
    if manifest.is_symlink() or not manifest.is_file():
        return {}
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise EnvError(f"package.json: {error}") from error
    if not isinstance(data, dict):
        raise EnvError("package.json is not a JSON object")
    declared: dict[str, str] = {}
    for name in DEPENDENCY_FIELDS:
        section = data.get(name)
        if isinstance(section, dict):
            declared.update({str(k): str(v) for k, v in section.items()})
    return declared


def copies_in(modules: Path, tree: Path) -> list[str]:
    """Where `modules` (a `node_modules` folder) holds a copy of the package checked out at
    `tree` (one of the same name, at any depth: a dependency that depends on it, or the package
    itself pinned as its own dependency), as paths under it. An attempt replayed beside such a
    copy could import it and hand it every call."""
    manifest = tree / "package.json"
    try:
        name = json.loads(manifest.read_text(encoding="utf-8")).get("name")
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(name, str) or not name:
        return []
    found = [modules / name, *modules.glob(f"**/node_modules/{name}")]
    return sorted(str(path.relative_to(modules)) for path in found if path.is_dir())


def ensure_node_modules(tree: Path) -> Path | None:
    """The `node_modules` folder with the dependencies `tree` declares, installed now if it
    does not exist yet; None when it declares none."""
    declared = declared_dependencies(tree)
    if not declared:
        return None
    lockfile = tree / LOCKFILE
    locked = "" if lockfile.is_symlink() or not lockfile.is_file() else lockfile.read_text()
    npm = npm_command()
    if npm is None:
        raise EnvError("npm is needed to install a JavaScript project's dependencies")
    cache = env_cache()
    folder = cache / key_of("node-modules", node_version(), declared, locked)
    ready = json.dumps(declared, sort_keys=True) + "\n"

    def install(folder: Path) -> None:
        _install(folder, npm, tree / "package.json", locked, cache / "npm-cache")

    return built_once(folder, install, ready) / "node_modules"


def _install(folder: Path, npm: list[str], manifest: Path, locked: str, npm_cache: Path) -> None:
    folder.mkdir(mode=0o755)
    shutil.copyfile(manifest, folder / "package.json")
    if locked:
        (folder / LOCKFILE).write_text(locked)
    command = "ci" if locked else "install"
    argv = [
        *npm,
        command,
        "--ignore-scripts",
        "--no-audit",
        "--no-fund",
        "--no-update-notifier",
        "--userconfig=/dev/null",
        f"--cache={npm_cache}",
        *([] if locked else ["--no-package-lock"]),
    ]
    run_installer(argv, f"npm {command}", cwd=folder)
    for path in [folder, *folder.rglob("*")]:  # every sandbox uid reads it; none writes it
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
