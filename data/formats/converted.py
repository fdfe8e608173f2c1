"""What a converter returns: a title, located text sections and notes, or why the file is
unusable; tables as text blocks (one row a line, cells joined by " | ", the header row repeated
at the top of every block of `TABLE_ROWS` rows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TABLE_ROWS = 20  # rows per block of a table (each block repeats the header row)
CELL_CHARS = 200  # a table cell is cut to this many characters
BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class Section:
    location: str
    text: str


@dataclass(frozen=True)
class Converted:
    title: str
    sections: list[Section]
    notes: list[str] = field(default_factory=list)  # what was left out, e.g. pages without text


class Unusable(Exception):
    """The file is of its format but holds nothing to use (`reason`: a stable label)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def table_blocks(rows: Sequence[Sequence[Any]], where: str) -> list[Section]:
    """A table as sections of up to `TABLE_ROWS` rows, each headed by the first row; the
    location names the rows (1-based, the header being row 1)."""
    lines = [[_cell(value) for value in row] for row in rows]
    lines = [_trimmed(row) for row in lines if any(row)]
    if not lines:
        return []
    header, body = lines[0], lines[1:]
    if not body:
        return [Section(f"{where}, row 1", " | ".join(header))]
    blocks = []
    for start in range(0, len(body), TABLE_ROWS):
        block = body[start : start + TABLE_ROWS]
        text = "\n".join(" | ".join(row) for row in [header, *block])
        blocks.append(Section(f"{where}, rows {start + 2}-{start + 1 + len(block)}", text))
    return blocks


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return " ".join(str(value).split())[:CELL_CHARS]


def _trimmed(row: list[str]) -> list[str]:
    while row and not row[-1]:
        row = row[:-1]
    return row


def text_file(path: Path) -> str:
    """A text file's content, decoded as UTF-8 (a byte-order mark dropped); raises `Unusable`
    `binary` (NUL bytes near the start) or `undecodable`."""
    raw = path.read_bytes()
    if b"\x00" in raw[:BINARY_SNIFF_BYTES]:
        raise Unusable("binary", "NUL bytes in content")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Unusable("undecodable", f"not UTF-8 at byte {exc.start}") from exc
