"""Office, PDF, e-book, notebook and markup files as text sections, each with where it came from.

A converter turns one file into a title and `Section`s: the text of one page, slide, sheet
block, notebook cell, chapter or titled section, with a `location` naming it ("page 3",
"slide 2", "sheet Prices, rows 1-20", "cell 4", "section Pricing"). Chunks never cross a
section, so a task's source can point at its page. Tables stay tables: one row a line, cells
joined by " | ", the header row repeated at the top of every block of `TABLE_ROWS` rows.

The libraries: pypdf (BSD; the text layer only: a page without one is recorded as such, never
guessed by OCR), python-docx and python-pptx (MIT), openpyxl (MIT); EPUB (a zip of XHTML) and
Jupyter notebooks (JSON) need none. Markdown, reStructuredText and AsciiDoc are rendered as a
reader sees them by `data.formats.markup`.

Run through `data.documents.conversion`, in a child process with time and memory limits: a converter
that hangs or crashes costs its file only. `python -m data.formats.converters FILE` prints the
JSON.
"""

from __future__ import annotations

import csv
import io
import json
import posixpath
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from data.formats.converted import Converted, Section, Unusable, table_blocks
from data.formats.html_text import html_text
from data.formats.markup import Prose, asciidoc, markdown, render_markdown, rst

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
    """A notebook's Markdown cells rendered as prose, each its own section; code cells (their
    source and outputs) are left out and counted in the notes."""
    document = json.loads(path.read_text(encoding="utf-8"))
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        raise Unusable("not_a_notebook", "no list of cells (nbformat 4)")
    sections, title, code_cells = [], "", 0
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            continue
        if cell.get("cell_type") == "code":
            code_cells += 1
            continue
        prose = Prose()
        render_markdown(_joined(cell.get("source")), prose)
        rendered = prose.converted("")
        title = title or rendered.title
        text = "\n\n".join(section.text for section in rendered.sections)
        if text.strip():
            sections.append(Section(f"cell {number}", text))
    notes = [f"code cells left out: {code_cells}"] if code_cells else []
    return Converted(title or path.stem, sections, notes)


def _joined(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source or "")


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


CONVERTERS: dict[str, tuple[str, Callable[[Path], Converted]]] = {
    ".pdf": ("pdf", pdf),
    ".docx": ("docx", docx),
    ".pptx": ("pptx", pptx),
    ".xlsx": ("xlsx", xlsx),
    ".csv": ("csv", csv_table),
    ".ipynb": ("notebook", notebook),
    ".epub": ("epub", epub),
    ".md": ("markdown", markdown),
    ".markdown": ("markdown", markdown),
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
