"""One small file of each converted document format, made here (no network, nothing bundled),
each stating facts about the fictional Brennick Ferry Company that a question can be asked of.

`FACTS[name]` is a sentence the file holds verbatim in the section `LOCATIONS[name]`.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

FACTS = {
    "ferry.pdf": "The Brennick ferry first sailed from Tessaly Port in 1904.",
    "fares.docx": "A return crossing to Brennick cost 14 shillings in 1931.",
    "fleet.pptx": "The steamer Marrow Star carried 212 passengers across the sound.",
    "timetable.xlsx": "Marrow Star | Tessaly Port | 0715",
    "crew.csv": "Ada Quillon | Captain | 1919",
    "history.epub": "The company built its slipway at Gullcombe in 1911.",
    "tides.ipynb": "The harbour at Gullcombe dries out at a spring tide of 5.2 metres.",
    "guide.rst": "The Brennick lighthouse keeper rang the fog bell every 90 seconds.",
    "engines.adoc": "The Marrow Star burned 3 tonnes of coal on a winter crossing.",
    "wreck.html": "The Gullcombe lifeboat reached the wreck of the Orla in 40 minutes.",
}
LOCATIONS = {
    "ferry.pdf": "page 1",
    "fares.docx": "section Fares",
    "fleet.pptx": "slide 2",
    "timetable.xlsx": "sheet Timetable, rows 2-3",
    "crew.csv": "table, rows 2-3",
    "history.epub": "chapter 1 (Beginnings)",
    "tides.ipynb": "cell 2",
    "guide.rst": "section Lighthouse",
    "engines.adoc": "section Engines",
    "wreck.html": "",
}
FILLER = "The company kept its records in a ledger at the harbour office for many years."


def write_samples(folder: Path) -> dict[str, Path]:
    """Write one file of each format into `folder`; returns them by name."""
    folder.mkdir(parents=True, exist_ok=True)
    writers = {
        "ferry.pdf": _pdf,
        "fares.docx": _docx,
        "fleet.pptx": _pptx,
        "timetable.xlsx": _xlsx,
        "crew.csv": _csv,
        "history.epub": _epub,
        "tides.ipynb": _notebook,
        "guide.rst": _rst,
        "engines.adoc": _asciidoc,
        "wreck.html": _html,
    }
    for name, write in writers.items():
        write(folder / name)
    return {name: folder / name for name in writers}


def pdf_bytes(pages: list[list[str]]) -> bytes:
    """A PDF whose pages show the given lines in Helvetica (an empty page has no text layer)."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", ""]
    kids = []
    font = 3 + 2 * len(pages)
    for lines in pages:
        page, content = len(objects) + 1, len(objects) + 2
        kids.append(f"{page} 0 R")
        shown = "".join(f"({line}) Tj T* " for line in lines)
        stream = f"BT /F1 11 Tf 14 TL 72 720 Td {shown}ET" if lines else ""
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R"
            f" /Resources << /Font << /F1 {font} 0 R >> >> >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>"
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    trailer = f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    return bytes(out + trailer.encode())


def _pdf(path: Path) -> None:
    path.write_bytes(pdf_bytes([[FACTS["ferry.pdf"], FILLER], []]))


def _docx(path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("The Brennick Ferry Company", 0)
    document.add_paragraph(FILLER)
    document.add_heading("Fares", 1)
    document.add_paragraph(FACTS["fares.docx"])
    table = document.add_table(rows=2, cols=2)
    for row, cells in zip(
        table.rows, [("Crossing", "Fare"), ("Single", "8 shillings")], strict=True
    ):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    document.save(str(path))


def _pptx(path: Path) -> None:
    from pptx import Presentation

    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "The Brennick fleet"
    first.placeholders[1].text = FILLER
    second = deck.slides.add_slide(deck.slide_layouts[1])
    second.shapes.title.text = "Steamers"
    second.placeholders[1].text = FACTS["fleet.pptx"]
    deck.save(str(path))


def _xlsx(path: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Timetable"
    for row in [("Vessel", "From", "Departs"), ("Marrow Star", "Tessaly Port", "0715")]:
        sheet.append(row)
    sheet.append(("Orla", "Gullcombe", "1240"))
    book.save(path)


def _csv(path: Path) -> None:
    path.write_text("Name,Role,Joined\nAda Quillon,Captain,1919\nTobin Reece,Engineer,1922\n")


def _epub(path: Path) -> None:
    chapter = (
        '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
        f"<head><title>Beginnings</title></head><body><p>{FACTS['history.epub']}</p>"
        f"<p>{FILLER}</p></body></html>"
    )
    package = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>A History of the'
        " Brennick Ferry</dc:title></metadata><manifest>"
        '<item id="c1" href="chapter1.xhtml" media-type="application/xhtml+xml"/></manifest>'
        '<spine><itemref idref="c1"/></spine></package>'
    )
    container = (
        '<?xml version="1.0"?><container version="1.0"'
        ' xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
        '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>"
    )
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("mimetype", "application/epub+zip")
        book.writestr("META-INF/container.xml", container)
        book.writestr("OEBPS/content.opf", package)
        book.writestr("OEBPS/chapter1.xhtml", chapter)


def _notebook(path: Path) -> None:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Tides at Gullcombe\n", FILLER]},
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": [FACTS["tides.ipynb"]],
        },
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": 1,
            "source": ["spring_tide_m = 5.2\n", "print(spring_tide_m)"],
            "outputs": [{"output_type": "stream", "name": "stdout", "text": ["5.2\n"]}],
        },
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(notebook))


def _rst(path: Path) -> None:
    path.write_text(
        "A Guide to Brennick\n===================\n\n"
        f"{FILLER}\n\nLighthouse\n----------\n\n{FACTS['guide.rst']}\n\n"
        ".. include:: /etc/passwd\n"
    )


def _asciidoc(path: Path) -> None:
    path.write_text(
        "= Brennick Engineering Notes\n:author: Tobin Reece\n\n"
        f"{FILLER}\n\n== Engines\n\n[NOTE]\n====\n{FACTS['engines.adoc']}\n====\n"
    )


def _html(path: Path) -> None:
    path.write_text(
        "<html><head><title>The Orla wreck</title></head><body>"
        "<nav><a href='/'>Home</a> <a href='/news'>News archive index</a></nav>"
        f"<main><h1>The wreck of the Orla</h1><p>{FACTS['wreck.html']}</p><p>{FILLER}</p></main>"
        "<footer>Copyright Brennick Heritage Society</footer></body></html>"
    )
