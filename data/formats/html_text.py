"""The visible main text of an HTML page, read by an event parser (no tree, no recursion, so
50,000-deep markup costs nothing more than flat markup).

Blocks become paragraphs; script, style and other hidden elements are dropped, and so is the
page furniture: navigation, headers, footers, asides and forms. Where the page marks its main
content (`<main>` or `<article>`), only that is kept.
"""

from __future__ import annotations

from html.parser import HTMLParser

BLOCKS = frozenset(
    [
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
        "dt",
        "dd",
        "figcaption",
    ]
)
HIDDEN = frozenset(["script", "style", "noscript", "template", "svg"])
FURNITURE = frozenset(["nav", "header", "footer", "aside", "form"])
MAIN = frozenset(("main", "article"))


def html_text(markup: str) -> tuple[str, str]:
    """The page's title and its main text (paragraphs separated by blank lines)."""
    parser = _MainText()
    parser.feed(markup)
    parser.close()
    return parser.title, parser.text()


class _MainText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self._parts: list[str] = []
        self._main_parts: list[str] = []
        self._hidden = 0  # open hidden or furniture elements
        self._main = 0  # open main or article elements
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in HIDDEN or tag in FURNITURE:
            self._hidden += 1
        elif tag == "title":
            self._in_title = True
        if tag in MAIN:
            self._main += 1
        if tag in BLOCKS:
            self._emit("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in HIDDEN or tag in FURNITURE:
            self._hidden = max(0, self._hidden - 1)
        elif tag == "title":
            self._in_title = False
        if tag in BLOCKS:
            self._emit("\n\n")
        if tag in MAIN:
            self._main = max(0, self._main - 1)

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._hidden:
            self._emit(data.replace("\n", " "))

    def _emit(self, text: str) -> None:
        self._parts.append(text)
        if self._main:
            self._main_parts.append(text)

    def text(self) -> str:
        main = "".join(self._main_parts)
        return main if main.strip() else "".join(self._parts)
