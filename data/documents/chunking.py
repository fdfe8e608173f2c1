"""Split normalised text into chunks of whole paragraphs (or sentences), with stable ids."""

from __future__ import annotations

import re
from dataclasses import dataclass

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


@dataclass(frozen=True)
class Span:
    text: str
    start: int
    end: int


PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


TABLE_CELLS = " | "  # how a table row joins its cells (`data.formats.converted.table_blocks`)


def split_sentences(text: str) -> list[str]:
    """Sentences of a text (a simple rule: end mark, space, capital or digit); a sentence never
    runs across a blank line (a heading or list item is a paragraph of its own), and each row
    of a table is a sentence of its own."""
    return [
        sentence.strip()
        for paragraph in PARAGRAPH_BREAK.split(text)
        for line in (paragraph.split("\n") if TABLE_CELLS in paragraph else [paragraph])
        for sentence in SENTENCE_END.split(line)
        if sentence.strip()
    ]


def chunk_text(text: str, max_chars: int, min_chars: int) -> list[Span]:
    """Greedy packing of paragraphs up to `max_chars`; over-long paragraphs split by sentence.

    Offsets index into `text`. A trailing piece shorter than `min_chars` joins the previous chunk.
    """
    pieces = list(_pieces(text, max_chars))
    spans: list[Span] = []
    start = end = None
    for piece_start, piece_end in pieces:
        if start is not None and piece_end - start > max_chars:
            spans.append(Span(text[start:end], start, end))
            start = None
        if start is None:
            start = piece_start
        end = piece_end
    if start is not None:
        if spans and end - start < min_chars:
            last = spans.pop()
            start = last.start
        spans.append(Span(text[start:end], start, end))
    return spans


def _pieces(text: str, max_chars: int):
    """(start, end) offsets of paragraphs, or of sentence runs inside over-long paragraphs."""
    for match in re.finditer(r"[^\n]+(?:\n[^\n]+)*", text):
        if match.end() - match.start() <= max_chars:
            yield match.start(), match.end()
            continue
        offset = match.start()
        for sentence in split_sentences(match.group()):
            found = text.index(sentence, offset)
            offset = found + len(sentence)
            yield found, offset
