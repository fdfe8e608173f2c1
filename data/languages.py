"""What taskfoundry needs to know about a repository's language: which files are tests, which
are source, and whether a tree is a project of that language. Python with pytest comes first;
another language is another class with the same three methods."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Protocol


class Language(Protocol):
    name: str

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
    markers = ("pyproject.toml", "setup.py", "setup.cfg")

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


LANGUAGES: tuple[Language, ...] = (Python(),)


def detect_language(files: list[str]) -> Language | None:
    return next((language for language in LANGUAGES if language.detect(files)), None)


def language_named(name: str) -> Language:
    """The supported language recorded as `name`; raises KeyError for any other."""
    for language in LANGUAGES:
        if language.name == name:
            return language
    raise KeyError(f"unsupported language: {name}")
