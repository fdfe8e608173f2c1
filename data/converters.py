"""Office, PDF, e-book, notebook and markup files as text sections, each with where it came from.

A converter turns one file into a title and `Section`s: the text of one page, slide, sheet
block, notebook cell, chapter or titled section, with a `location` naming it ("page 3",
"slide 2", "sheet Prices, rows 1-20", "cell 4", "section Pricing"). Chunks never cross a
section, so a task's source can point at its page. Tables stay tables: one row a line, cells
joined by " | ", the header row repeated at the top of every block of `TABLE_ROWS` rows.

The libraries: pypdf (BSD; the text layer only: a page without one is recorded as such, never
guessed by OCR), python-docx and python-pptx (MIT), openpyxl (MIT), docutils (public domain,
BSD) for reStructuredText; EPUB (a zip of XHTML) and Jupyter notebooks (JSON) need none.
AsciiDoc has no maintained converter under a permissive licence: it is read as light markup
(headings, attributes, block delimiters and inline marks taken out; `include::` not followed).

Run through `data.conversion`, in a child process with time and memory limits: a converter
that hangs or crashes costs its file only. `python -m data.converters FILE` prints the JSON.
"""

from __future__ import annotations

import csv
import io
import json
import posixpath
import re
import sys
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from data.html_text import html_text

TABLE_ROWS = 20  # rows per block of a table (each block repeats the header row)
OUTPUT_CHARS = 1000  # a notebook cell output longer than this is left out
CELL_CHARS = 200  # a table cell is cut to this many characters


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


# --- tables -------------------------------------------------------------------------------


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


def markdown_text(markdown: str) -> tuple[str, str]:
    """Markdown's first heading and its text without heading marks, bold and code marks."""
    heading = re.search(r"^#{1,6}\s+(.+)$", markdown, flags=re.MULTILINE)
    body = re.sub(r"^#{1,6}\s+", "", markdown, flags=re.MULTILINE)
    body = re.sub(r"(\*\*|__|`)", "", body)
    return (heading.group(1).strip() if heading else ""), body


# --- formats ------------------------------------------------------------------------------


def pdf(path: Path) -> Converted:
    from pypdf import PdfReader

    reader = PdfReader(path)
    if reader.is_encrypted and not reader.decrypt(""):
        raise Unusable("encrypted", "the PDF needs a password")
    sections, blank = [], []
    for number, page in enumerate(reader.pages, start=1):
        text = page.extract_text() or ""
        if text.strip():
            sections.append(Section(f"page {number}", text))
        else:
            blank.append(number)
    if not sections:
        raise Unusable("no_text_layer", f"{len(blank)} pages, none with a text layer (scanned?)")
    notes = [f"pages without a text layer: {_ranges(blank)}"] if blank else []
    title = (reader.metadata.title if reader.metadata else None) or path.stem
    return Converted(str(title), sections, notes)


def docx(path: Path) -> Converted:
    import docx as python_docx
    from docx.table import Table

    document = python_docx.Document(str(path))
    heading, parts, sections, title = "", [], [], document.core_properties.title or ""

    def close() -> None:
        if any(p.strip() for p in parts):
            sections.append(Section(_titled(heading), "\n\n".join(parts)))
        parts.clear()

    for block in document.iter_inner_content():
        if isinstance(block, Table):
            rows = [[cell.text for cell in row.cells] for row in block.rows]
            parts.extend(s.text for s in table_blocks(rows, "table"))
            continue
        text = block.text.strip()
        style = block.style.name if block.style is not None else ""
        if text and style.startswith(("Heading", "Title")):
            close()
            heading = text
            title = title or text
        parts.append(text)
    close()
    return Converted(title or path.stem, sections)


def pptx(path: Path) -> Converted:
    from pptx import Presentation

    deck = Presentation(str(path))
    sections, title = [], deck.core_properties.title or ""
    for number, slide in enumerate(deck.slides, start=1):
        parts = list(_slide_texts(slide.shapes))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                parts.append(f"Notes: {notes}")
        if any(p.strip() for p in parts):
            sections.append(Section(f"slide {number}", "\n\n".join(parts)))
            title = title or parts[0].split("\n")[0]
    return Converted(title or path.stem, sections)


def _slide_texts(shapes: Any) -> Iterator[str]:
    """The text of a slide's shapes in order, groups opened (without recursion), tables as
    tables."""
    stack = list(reversed(list(shapes)))
    while stack:
        shape = stack.pop()
        if getattr(shape, "shapes", None) is not None and shape.shape_type == 6:  # a group
            stack.extend(reversed(list(shape.shapes)))
        elif getattr(shape, "has_table", False) and shape.has_table:
            rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
            yield from (s.text for s in table_blocks(rows, "table"))
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            text = shape.text_frame.text.strip()
            if text:
                yield text


def xlsx(path: Path) -> Converted:
    import openpyxl

    book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        sections = [
            block
            for sheet in book.worksheets
            for block in table_blocks(
                list(sheet.iter_rows(values_only=True)), f"sheet {sheet.title}"
            )
        ]
        title = book.properties.title or path.stem
    finally:
        book.close()
    return Converted(title, sections)


def csv_table(path: Path) -> Converted:
    text = path.read_text(encoding="utf-8-sig")
    try:
        dialect: Any = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    return Converted(path.stem, table_blocks(rows, "table"))


def notebook(path: Path) -> Converted:
    document = json.loads(path.read_text(encoding="utf-8"))
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        raise Unusable("not_a_notebook", "no list of cells (nbformat 4)")
    sections, title = [], ""
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            continue
        parts = [_joined(cell.get("source"))]
        if cell.get("cell_type") == "markdown":
            heading, parts[0] = markdown_text(parts[0])
            title = title or heading
        for output in cell.get("outputs") or []:
            shown = _output_text(output)
            if shown and len(shown) <= OUTPUT_CHARS:
                parts.append(f"Output: {shown}")
        if any(p.strip() for p in parts):
            sections.append(Section(f"cell {number}", "\n\n".join(p for p in parts if p.strip())))
    return Converted(title or path.stem, sections)


def _joined(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source or "")


def _output_text(output: Any) -> str:
    if not isinstance(output, dict):
        return ""
    if output.get("output_type") == "stream":
        return _joined(output.get("text")).strip()
    if output.get("output_type") == "error":
        return f"{output.get('ename', '')}: {output.get('evalue', '')}".strip(": ")
    data = output.get("data") or {}
    return _joined(data.get("text/plain")).strip() if isinstance(data, dict) else ""


def epub(path: Path) -> Converted:
    with zipfile.ZipFile(path) as book:
        container = ElementTree.fromstring(book.read("META-INF/container.xml"))
        rootfile = next(
            (e.get("full-path") for e in container.iter() if e.tag.endswith("rootfile")), None
        )
        if not rootfile:
            raise Unusable("not_an_epub", "META-INF/container.xml names no rootfile")
        package = ElementTree.fromstring(book.read(rootfile))
        base = posixpath.dirname(rootfile)
        hrefs = {e.get("id"): e.get("href") for e in package.iter() if e.tag.endswith("item")}
        spine = [e.get("idref") for e in package.iter() if e.tag.endswith("itemref")]
        title = next((e.text for e in package.iter() if e.tag.endswith("title") and e.text), "")
        sections = []
        for number, idref in enumerate(spine, start=1):
            href = hrefs.get(idref)
            if not href:
                continue
            page_title, text = html_text(
                book.read(posixpath.join(base, href)).decode("utf-8", "replace")
            )
            if text.strip():
                name = f"chapter {number}" + (
                    f" ({page_title.strip()})" if page_title.strip() else ""
                )
                sections.append(Section(name, text))
    return Converted(title or path.stem, sections)


def rst(path: Path) -> Converted:
    from docutils import nodes
    from docutils.core import publish_doctree

    settings = {
        "report_level": 5,
        "halt_level": 5,
        "file_insertion_enabled": False,  # `.. include::` would read other files
        "raw_enabled": False,
        "warning_stream": io.StringIO(),
    }
    tree = publish_doctree(path.read_text(encoding="utf-8-sig"), settings_overrides=settings)
    for message in list(tree.findall(nodes.system_message)):  # docutils' own warnings
        message.parent.remove(message)
    title = str(tree.get("title") or "")
    sections, opening = [], []
    for child in tree.children:
        if isinstance(child, nodes.section):
            heading = child.next_node(nodes.title)
            name = heading.astext() if heading is not None else ""
            sections.append(Section(f"section {name}" if name else "section", child.astext()))
        elif not isinstance(child, nodes.title | nodes.subtitle | nodes.docinfo):
            opening.append(child.astext())
    if any(p.strip() for p in opening):
        sections.insert(0, Section("opening", "\n\n".join(opening)))
    return Converted(title or path.stem, sections)


_ADOC_HEADING = re.compile(r"^(={1,6})\s+(.+)$")
_ADOC_SKIPPED = re.compile(
    r"^(:[\w-]+:.*|\[.*\]|-{4,}|={4,}|\.{4,}|\*{4,}|_{4,}|\+{4,}|/{4,}|//.*|include::.*)$"
)


def asciidoc(path: Path) -> Converted:
    title, heading, parts, sections = "", "", [], []

    def close() -> None:
        if any(p.strip() for p in parts):
            sections.append(Section(_titled(heading), "\n".join(parts)))
        parts.clear()

    for line in path.read_text(encoding="utf-8-sig").splitlines():
        match = _ADOC_HEADING.match(line)
        if match and len(match.group(1)) == 1 and not title:
            title = match.group(2).strip()
            continue
        if match:
            close()
            heading = match.group(2).strip()
            continue
        if _ADOC_SKIPPED.match(line.strip()):
            continue
        parts.append(re.sub(r"(?<![\w*_`])([*_`]{1,2})(\S(?:.*?\S)?)\1(?![\w*_`])", r"\2", line))
    close()
    return Converted(title or path.stem, sections)


CONVERTERS: dict[str, tuple[str, Callable[[Path], Converted]]] = {
    ".pdf": ("pdf", pdf),
    ".docx": ("docx", docx),
    ".pptx": ("pptx", pptx),
    ".xlsx": ("xlsx", xlsx),
    ".csv": ("csv", csv_table),
    ".ipynb": ("notebook", notebook),
    ".epub": ("epub", epub),
    ".rst": ("rst", rst),
    ".adoc": ("asciidoc", asciidoc),
    ".asciidoc": ("asciidoc", asciidoc),
}


def _titled(heading: str) -> str:
    """The location of the text under `heading` ("opening": before the first one)."""
    return f"section {heading}" if heading else "opening"


def _ranges(numbers: list[int]) -> str:
    """`1-3, 7` for [1, 2, 3, 7]."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def main(argv: list[str]) -> int:
    """Convert the file `argv[0]`; print `{"converted": ...}` or `{"unusable": ...}` as JSON."""
    path = Path(argv[0])
    _, convert = CONVERTERS[path.suffix.lower()]
    try:
        result: dict[str, Any] = {"converted": asdict(convert(path))}
    except Unusable as unusable:
        result = {"unusable": {"reason": unusable.reason, "detail": unusable.detail}}
    except MemoryError:
        raise  # past the memory limit: the parent says so (`conversion_failed`)
    except Exception as exc:  # noqa: BLE001 - a file its library cannot read: said, not raised
        last = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        result = {"unusable": {"reason": "unreadable_document", "detail": last}}
    sys.stdout.write(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
