"""A small Python repository for the grader's tests (`tests/test_outside_check.py`,
`tests/test_redteam.py`): `cents` is a stub its fix implements, `label` needs no change."""

from __future__ import annotations

from pathlib import Path

SOURCE = '''"""Prices."""


def cents(text):
    """'3.50' as 350."""
    return 0


def label(amount):
    return f"{amount} cents"
'''
FIXED = SOURCE.replace(
    "    return 0\n",
    '    whole, _, part = text.partition(".")\n'
    '    return int(whole) * 100 + int((part + "00")[:2])\n',
)
TESTS = """from prices import cents, label


def test_cents():
    assert cents("3.50") == 350
    assert cents("12") == 1200


def test_label():
    assert label(5) == "5 cents"
"""
F2P, P2P = ["tests/test_prices.py::test_cents"], ["tests/test_prices.py::test_label"]


def whole_file(text: str) -> str:
    return f"```python\n# file: src/prices.py\n{text}```"


def write_prices_repository(tree: Path) -> Path:
    """The repository's start state at `tree` (an existing folder)."""
    (tree / "src").mkdir()
    (tree / "src" / "prices.py").write_text(SOURCE)
    (tree / "tests").mkdir()
    (tree / "tests" / "test_prices.py").write_text(TESTS)
    (tree / "pyproject.toml").write_text('[project]\nname = "prices"\nversion = "0"\n')
    return tree
