"""No function or method of the product is over 150 lines: past that, it does more than one
thing. The product is every Python file of its layers (`flows`, `families`, `generators`,
`judges`, `harnesses`, `data`, `sources`); the tests and the benchmarks are not. A function is
counted from its first decorator (else its `def`) to its last line, a nested one by itself
and within the one around it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("flows", "families", "generators", "judges", "harnesses", "data", "sources")
MOST_LINES = 150


def long_functions(source: str, name: str, most: int = MOST_LINES) -> list[str]:
    """`name:line function (N lines)` for each function or method of `source` over `most`
    lines."""
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = node.end_lineno - first + 1
            if lines > most:
                found.append(f"{name}:{node.lineno} {node.name} ({lines} lines)")
    return found


def product_files() -> list[Path]:
    return sorted(path for layer in LAYERS for path in (ROOT / layer).rglob("*.py"))


def test_no_product_function_is_over_150_lines():
    files = product_files()
    assert len(files) > 100  # the walk found the product
    too_long = [
        line
        for path in files
        for line in long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert too_long == [], f"split these functions (at most {MOST_LINES} lines each): {too_long}"


def test_the_check_counts_decorators_methods_and_nested_functions():
    body = "".join(f"        x{i} = {i}\n" for i in range(149))
    source = (
        f"@decorated\ndef decorated():\n{body}\n"  # 151 lines with its decorator
        f"def at_most():\n{body}"  # 150 lines: kept
        f"class C:\n    def method(self):\n{body}{body}"
        f"def outer():\n    def inner():\n{body}{body}"
    )
    assert sorted(long_functions(source, "m.py")) == [
        "m.py:2 decorated (151 lines)",
        "m.py:304 method (299 lines)",
        "m.py:603 outer (300 lines)",
        "m.py:604 inner (299 lines)",
    ]
