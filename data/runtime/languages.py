"""What taskfoundry needs to know about a repository's language: which files are tests, which
are source, whether a tree is a project of that language, how its files are shown in a prompt
and what a body taken out is replaced by. Running its tests is the sandbox's side
(`data.runtime.test_runners`, by the language's `name`)."""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Protocol

SKIPPED_FOLDERS = (".git", "node_modules")  # never part of a project's own files


class Language(Protocol):
    name: str
    runner: str  # what runs its tests: "pytest" or "node" (`data.runtime.test_runners`)
    markers: tuple[str, ...]  # files at a project's root that say it is one
    fence: str  # the info string of a fenced block of its source
    comment: str  # how a line comment starts (a shown file's `file:` header)
    stub: str  # the statement a function's body is replaced by when it is taken out

    def is_test_file(self, path: str) -> bool: ...

    def is_source_file(self, path: str) -> bool: ...

    def detect(self, files: list[str]) -> bool:
        """Whether a tree with these files (paths relative to its root) is such a project."""
        ...


class Python:
    """Tests as pytest discovers them: `test_*.py`, `*_test.py`, `conftest.py`, and every
    file under a `tests/` or `test/` folder (fixtures and data belong with the tests: a
    replayed commit's start has them, its reference patch does not)."""

    name = "python"
    runner = "pytest"
    markers = ("pyproject.toml", "setup.py", "setup.cfg")
    fence = "python"
    comment = "#"
    stub = "raise NotImplementedError"

    def is_test_file(self, path: str) -> bool:
        parts = PurePosixPath(path).parts
        if any(part in ("tests", "test") for part in parts[:-1]):
            return True  # test modules and their fixtures and data alike
        name = parts[-1]
        named = name.startswith("test_") and name.endswith(".py")
        return named or name.endswith("_test.py") or name == "conftest.py"

    def is_source_file(self, path: str) -> bool:
        return path.endswith(".py") and not self.is_test_file(path)

    def detect(self, files: list[str]) -> bool:
        at_root = {f for f in files if "/" not in f}
        return bool(at_root & set(self.markers)) or any(self.is_source_file(f) for f in files)


class JavaScript:
    """A Node project (`package.json` at its root) tested with Node's test runner. Test files
    are those the runner finds by default (`*.test.js`, `*-test.js`, `*_test.js`, `test-*.js`,
    `test.js`, and any script under a `test/` folder; `.mjs` and `.cjs` alike), plus `*.spec.js`
    and the files under `test/`, `tests/` and `__tests__/` folders (fixtures and data)."""

    name = "javascript"
    runner = "node"
    markers = ("package.json",)
    fence = "javascript"
    comment = "//"
    stub = 'throw new Error("not implemented");'
    own_suffixes: tuple[str, ...] = (".js", ".mjs", ".cjs")  # files written in it
    suffixes: tuple[str, ...] = own_suffixes  # files of its projects: it and what they may hold
    test_folders = ("test", "tests", "__tests__")

    def is_test_file(self, path: str) -> bool:
        parts = PurePosixPath(path).parts
        if any(part in self.test_folders for part in parts[:-1]):
            return True
        return self.is_runnable_test(path) or bool(self._named(r".+\.spec", parts[-1]))

    def is_runnable_test(self, path: str) -> bool:
        """Whether Node's test runner runs `path` when given no file names."""
        parts = PurePosixPath(path).parts
        if any(part in SKIPPED_FOLDERS for part in parts) or not path.endswith(self.suffixes):
            return False
        return "test" in parts[:-1] or self._named(r"(.+[.\-_]test|test-.+|test)", parts[-1])

    def _named(self, stem: str, name: str) -> bool:
        """Whether the file name `name` is `stem` with one of this language's suffixes."""
        return any(re.fullmatch(stem + re.escape(suffix), name) for suffix in self.suffixes)

    def is_source_file(self, path: str) -> bool:
        parts = PurePosixPath(path).parts
        if any(part in SKIPPED_FOLDERS for part in parts) or path.endswith(DECLARATIONS):
            return False
        return path.endswith(self.suffixes) and not self.is_test_file(path)

    def detect(self, files: list[str]) -> bool:
        return any(f in self.markers for f in files)


DECLARATIONS = (".d.ts", ".d.mts", ".d.cts")  # TypeScript's type declarations: no code


class TypeScript(JavaScript):
    """A Node project written in TypeScript that Node runs by stripping its types (no build
    step), tested with Node's test runner: as JavaScript, with `.ts`, `.mts` and `.cts` files
    too (a TypeScript project may hold JavaScript). It is one where `package.json` sits at the
    root beside a `tsconfig.json` or a TypeScript source file."""

    name = "typescript"
    fence = "typescript"
    own_suffixes = (".ts", ".mts", ".cts")
    suffixes = (*own_suffixes, *JavaScript.own_suffixes)

    def detect(self, files: list[str]) -> bool:
        typed = any(f.endswith(self.own_suffixes) and self.is_source_file(f) for f in files)
        return super().detect(files) and ("tsconfig.json" in files or typed)


LANGUAGES: tuple[Language, ...] = (Python(), TypeScript(), JavaScript())


def detect_language(files: list[str]) -> Language | None:
    """The language of a tree with these files: the first whose marker file is at its root
    and that recognises the tree, else the first with a source file among them."""
    at_root = {f for f in files if "/" not in f}
    marked = [lang for lang in LANGUAGES if at_root & set(lang.markers) and lang.detect(files)]
    return marked[0] if marked else next((lang for lang in LANGUAGES if lang.detect(files)), None)


def project_files(tree: Path) -> list[str]:
    """The files of the project checked out at `tree` (relative paths, sorted), its
    SKIPPED_FOLDERS left out."""
    files = []
    for folder, children, names in os.walk(tree):
        children[:] = [c for c in children if c not in SKIPPED_FOLDERS]
        files += [(Path(folder) / name).relative_to(tree).as_posix() for name in names]
    return sorted(files)


def tree_language(tree: Path) -> Language | None:
    """The language of the project checked out at `tree` (`detect_language` on its files)."""
    return detect_language(project_files(tree))


def language_named(name: str) -> Language:
    """The supported language recorded as `name`; raises KeyError for any other."""
    for language in LANGUAGES:
        if language.name == name:
            return language
    raise KeyError(f"unsupported language: {name}")


def is_any_test_file(path: str) -> bool:
    """Whether `path` is a test file in any supported language (edits to it are set aside)."""
    return any(language.is_test_file(path) for language in LANGUAGES)


def of_path(path: str) -> Language:
    """The language a source file at `path` is written in (Python for any other file)."""
    return next(
        (lang for lang in (TypeScript(), JavaScript()) if path.endswith(lang.own_suffixes)),
        Python(),
    )
