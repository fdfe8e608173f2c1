"""The building blocks of taskfoundry's HTML pages (the report, the curation page): their
style sheet, and escaped text, sections, notes and tables."""

from __future__ import annotations

import html
from typing import Any

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222;
       padding: 0 1rem; }
h1 { margin-bottom: 0.2rem; }
section { margin-top: 2.5rem; }
.meta, .note { color: #555; }
.empty { padding: 1rem; background: #f6f6f6; border-left: 4px solid #bbb; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.text { white-space: pre-wrap; max-width: 30rem; }
"""


def escaped(value: Any) -> str:
    return html.escape(str(value))


def section(name: str, title: str, body: str) -> str:
    return f'\n<section id="{name}">\n<h2>{escaped(title)}</h2>\n{body}\n</section>\n'


def empty_note(text: str) -> str:
    return f'<p class="empty">{escaped(text)}</p>'


def table(header: list[str], rows: list[list[Any]], classes: list[str] | None = None) -> str:
    """An HTML table, every cell escaped; `classes` styles each column's cells."""
    attributes = [f' class="{c}"' if c else "" for c in classes or [""] * len(header)]
    head = "".join(f"<th>{escaped(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f"<td{a}>{escaped(v)}</td>" for a, v in zip(attributes, row, strict=True))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
