"""File formats: what each kind of document is converted to (sections of text, tables in
blocks, markup as a reader sees it). The conversion itself runs in a child process under time
and memory limits (`data.documents.conversion`) as `python -m data.formats.converters`, so this
room stays light: it imports nothing of the lake, the models or the settings, and the child
starts with its limit's memory for the document."""

from data.formats.converted import BINARY_SNIFF_BYTES, Converted, Section, Unusable
from data.formats.converters import CONVERTERS
from data.formats.html_text import html_text

__all__ = ["BINARY_SNIFF_BYTES", "CONVERTERS", "Converted", "Section", "Unusable", "html_text"]
