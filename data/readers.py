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
from html.parser import HTMLParser
from pathlib import Path

FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".html": "html",
    ".htm": "html",
}
BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class Document:
    path: str
    format: str
    title: str
    text: str
    sha256: str


@dataclass(frozen=True)
class Rejected:
    path: str
    reason: str
    detail: str


def discover(paths: list[str]) -> list[Path]:
    """Expand files, folders (recursively, not following symlinked folders) and glob patterns."""
    found: list[Path] = []
    for raw in paths:
        matches = [Path(m) for m in sorted(glob.glob(raw, recursive=True))] or [Path(raw)]
        for path in matches:
            if path.is_dir() and not path.is_symlink():
                for folder, dirs, files in os.walk(path):
                    dirs.sort()
                    found.extend(Path(folder) / name for name in sorted(files))
                    found.extend(Path(folder) / d for d in dirs if (Path(folder) / d).is_symlink())
            else:
                found.append(path)
    return list(dict.fromkeys(found))


def read_document(path: Path, max_bytes: int) -> Document | Rejected:
    """Read one file into a `Document`, or explain in a `Rejected` why it cannot be used."""
    name = str(path)
    info = regular_file(path)
    if isinstance(info, Rejected):
        return info
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        return Rejected(name, "unsupported_format", path.suffix or "no extension")
    if info.st_size > max_bytes:
        return Rejected(name, "too_large", f"{info.st_size} bytes > {max_bytes}")
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
    text = normalise(body)
    if not text:
        return Rejected(name, "empty", "no text after normalisation")
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return Document(path=name, format=fmt, title=" ".join(title.split()), text=text, sha256=sha)


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
        parser = _HTMLText()
        parser.feed(decoded)
        parser.close()
        return parser.title.strip() or path.stem, parser.text()
    if fmt == "markdown":
        heading = re.search(r"^#{1,6}\s+(.+)$", decoded, flags=re.MULTILINE)
        body = re.sub(r"^#{1,6}\s+", "", decoded, flags=re.MULTILINE)
        body = re.sub(r"(\*\*|__|`)", "", body)
        return (heading.group(1).strip() if heading else path.stem), body
    return path.stem, decoded


class _HTMLText(HTMLParser):
    """Visible text of an HTML page: blocks become paragraphs, script/style are dropped.

    The parser is event-based (no tree), so deeply nested markup costs no recursion.
    """

    BLOCKS = {
        "p",
        "div",
        "section",
        "article",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "br",
        "tr",
        "table",
        "header",
        "footer",
        "main",
        "blockquote",
        "pre",
    }
    HIDDEN = {"script", "style", "noscript", "template"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._hidden = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self.HIDDEN:
            self._hidden += 1
        elif tag == "title":
            self._in_title = True
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._hidden:
            self.parts.append(data.replace("\n", " "))

    def text(self) -> str:
        return "".join(self.parts)


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
