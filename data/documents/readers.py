"""Document readers: turn files into normalised text, or a clear reason why not.

Every path is looked at with `lstat` first, so FIFOs, sockets and devices are refused without
ever being opened (opening a FIFO would block), and symlinks are resolved strictly (broken links
and loops are reasons, not crashes).
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from data.documents.conversion import ConversionError, convert
from data.formats import BINARY_SNIFF_BYTES, CONVERTERS, Section, html_text
from data.public_names import relative_name, search_root

FORMATS = {
    ".txt": "text",
    ".html": "html",
    ".htm": "html",
}
SECTION_BREAK = "\n\n"  # between a document's sections in its text


@dataclass(frozen=True)
class Document:
    path: str
    format: str
    title: str
    text: str  # the sections' texts, joined by a blank line
    sha256: str
    # (location, start, end) of each section in `text`: a page, slide, sheet block, cell...;
    # a plain text, Markdown or HTML file is one section without a location (all of `text`)
    sections: tuple[tuple[str, int, int], ...]
    notes: tuple[str, ...] = ()  # what the converter left out (pages without a text layer)


@dataclass(frozen=True)
class Rejected:
    path: str
    reason: str
    detail: str


def discover(paths: list[str]) -> dict[Path, str]:
    """Expand files, folders (recursively, not following symlinked folders) and glob patterns
    into the files found, each with the name an export gives it (`data.public_names`)."""
    found: dict[Path, str] = {}
    for raw in paths:
        matches = [Path(m) for m in sorted(glob.glob(raw, recursive=True))]
        root = search_root(raw)
        for path in matches or [Path(raw)]:
            if path.is_dir() and not path.is_symlink():
                for folder, dirs, files in os.walk(path):
                    dirs.sort()
                    inside = [Path(folder) / name for name in sorted(files)]
                    inside += [Path(folder) / d for d in dirs if (Path(folder) / d).is_symlink()]
                    for file in inside:
                        found.setdefault(file, relative_name(file, root))
            else:
                found.setdefault(path, relative_name(path, root))
    return found


def read_document(path: Path, limits: ReadLimits) -> Document | Rejected:
    """Read one file into a `Document`, or explain in a `Rejected` why it cannot be used.
    Office, PDF, e-book, notebook and markup formats (`data.formats.converters`) are converted in
    a child process within `limits`."""
    name = str(path)
    info = regular_file(path)
    if isinstance(info, Rejected):
        return info
    suffix = path.suffix.lower()
    fmt = FORMATS.get(suffix) or (CONVERTERS[suffix][0] if suffix in CONVERTERS else None)
    if fmt is None:
        return Rejected(name, "unsupported_format", path.suffix or "no extension")
    if info.st_size > limits.max_bytes:
        return Rejected(name, "too_large", f"{info.st_size} bytes > {limits.max_bytes}")
    if suffix in CONVERTERS:
        try:
            converted = convert(path, limits.convert_timeout_s, limits.convert_memory_mb)
        except ConversionError as error:
            return Rejected(name, error.reason, error.detail)
        return _document(name, fmt, converted.title, converted.sections, converted.notes)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return Rejected(name, "unreadable", str(exc))
    if b"\x00" in raw[:BINARY_SNIFF_BYTES]:
        return Rejected(name, "binary", "NUL bytes in content")
    try:
        decoded = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return Rejected(name, "undecodable", f"not UTF-8 at byte {exc.start}")
    title, body = _to_text(decoded, fmt, path)
    return _document(name, fmt, title, [Section("", body)], [])


@dataclass(frozen=True)
class ReadLimits:
    max_bytes: int  # larger files are refused unread
    convert_timeout_s: float  # a converted format's child process: wall and CPU time
    convert_memory_mb: int  # and address space


def _document(
    name: str, fmt: str, title: str, sections: list[Section], notes: list[str]
) -> Document | Rejected:
    """The document of normalised, non-empty `sections`, or `empty` when none has text."""
    kept = [(s.location, text) for s in sections if (text := normalise(s.text))]
    if not kept:
        return Rejected(name, "empty", "no text after normalisation")
    spans, offset = [], 0
    for location, text in kept:
        spans.append((location, offset, offset + len(text)))
        offset += len(text) + len(SECTION_BREAK)
    text = SECTION_BREAK.join(text for _, text in kept)
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return Document(name, fmt, " ".join(title.split()), text, sha, tuple(spans), tuple(notes))


def regular_file(path: Path) -> os.stat_result | Rejected:
    """`path`'s stat when it is (or links to) a regular file, else why not: missing,
    unreadable, a broken link or a link loop, or a FIFO, socket, device or directory. Nothing
    is opened, so a FIFO cannot block."""
    name = str(path)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return Rejected(name, "missing", "no such file")
    except OSError as exc:
        return Rejected(name, "unreadable", str(exc))
    if stat.S_ISLNK(info.st_mode):
        try:
            info = path.resolve(strict=True).stat()
        except RuntimeError:
            return Rejected(name, "symlink_loop", "symlink resolves to itself")
        except FileNotFoundError:
            return Rejected(name, "broken_symlink", f"target missing: {os.readlink(path)}")
        except OSError as exc:  # ELOOP surfaces as OSError on some Pythons
            return Rejected(name, "symlink_loop", str(exc))
    if not stat.S_ISREG(info.st_mode):
        return Rejected(name, "not_a_regular_file", _file_kind(info.st_mode))
    return info


def normalise(text: str) -> str:
    """NFC, unified newlines, collapsed inline whitespace, at most one blank line in a row."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    lines = [re.sub(r"[ \t\f\v\u00a0]+", " ", line).strip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _to_text(decoded: str, fmt: str, path: Path) -> tuple[str, str]:
    if fmt == "html":
        title, text = html_text(decoded)
        return title.strip() or path.stem, text
    return path.stem, decoded


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISDIR, "directory"),
    ):
        if test(mode):
            return kind
    return "special file"
