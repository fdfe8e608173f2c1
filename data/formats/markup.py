"""Markup as a reader sees it: Markdown (CommonMark, with MyST's roles, directives and front
matter), reStructuredText (with Sphinx's roles and directives) and AsciiDoc, rendered to plain
prose before chunking.

A role reads as its text or its target's name (`{func}` ~pkg.mod.run ` reads "run", `:ref:` the
guide <guide> ` reads "the guide"), a link as its text, a directive as its body (an admonition's
text, a described function's prose), never as its name or options. Code blocks are left out (a
line of code is not a sentence a question can quote) and counted in the notes; each list item
is a paragraph of its own and each table a block of rows (`data.formats.converted.table_blocks`),
so a sentence never runs across them. A heading opens a section named after it, which a task's
source points at.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from data.formats.converted import Converted, Section, table_blocks, text_file
from data.formats.html_text import html_text

# MyST and Sphinx directives whose body is code, or that hold nothing a reader reads as prose
CODE_DIRECTIVES = frozenset(
    """code code-block sourcecode literalinclude doctest testcode testoutput testsetup
    testcleanup ipython jupyter-execute code-cell plot math productionlist graphviz
    mermaid highlight raw""".split()  # noqa: SIM905 (a readable block)
)
DROPPED_DIRECTIVES = frozenset(
    """toctree contents index currentmodule module automodule autoclass autofunction
    automethod autoattribute autodata autoexception autosummary include image
    tabularcolumns sectionauthor codeauthor meta sectnum""".split()  # noqa: SIM905 (a readable block)
)
VERSION_DIRECTIVES = {
    "versionadded": "Added in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
    "versionremoved": "Removed in version",
}
NUMBERED_ROLES = {"pep": "PEP", "rfc": "RFC"}
_READER_DIRECTIVES = CODE_DIRECTIVES | DROPPED_DIRECTIVES | set(VERSION_DIRECTIVES)
SENTENCE = re.compile(r"[.!?]\s*$")
CODE_SHARE = 0.6  # of a directive's lines that read as code, for it to be code
_CODE_LINE = re.compile(
    r"^(@|def |class |import |from \S+ import |return\b|>>>|\.\.\.|\$ |# )|[)\]{};,(]$| = "
)
_ROLE_TARGET = re.compile(r"(?s)(.*?)\s*<([^<>]+)>")
_LEFTOVER_ROLE = re.compile(r"(?<![\w`]):((?:[\w-]+:)*[\w-]+):`([^`]+)`")
_ROLE_BEFORE_CODE = re.compile(r"(?<![\w`]):((?:[\w-]+:)*[\w-]+):$")
_DIRECTIVE_OPTION = re.compile(r"^:[\w-]+:(\s.*)?$")


def role_text(content: str, name: str = "") -> str:
    """What a reader sees of a role named `name`: the text of `text <target>`, else the
    target, cut to its last part where it starts with `~` or is a document's path (a leading
    `!` or `.` dropped); a `pep` or `rfc` role reads "PEP 526", "RFC 7231"."""
    if name.rsplit(":", 1)[-1] in NUMBERED_ROLES and content.strip().isdigit():
        return f"{NUMBERED_ROLES[name.rsplit(':', 1)[-1]]} {content.strip()}"
    labelled = _ROLE_TARGET.fullmatch(content.strip())
    if labelled and labelled.group(1).strip():
        return labelled.group(1).strip()
    target = (labelled.group(2) if labelled else content).strip().lstrip("!")
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target.lstrip(".").rstrip("/").rsplit("/", 1)[-1]  # a document: its name


def version_note(name: str, argument: str) -> str:
    """A version directive as Sphinx shows it: "Changed in version 2.0: Renamed." """
    version, *explanation = argument.split(maxsplit=1) or [""]
    note = f"{VERSION_DIRECTIVES[name]} {version}"
    return f"{note}: {explanation[0]}" if explanation else f"{note}."


def looks_like_code(lines: Iterable[str]) -> bool:
    """Whether most lines of a directive's body read as code (an extension's example or
    console session: `.. click:example::`), not prose."""
    lines = [line.strip() for line in lines if line.strip()]
    code = sum(bool(_CODE_LINE.search(line)) for line in lines)
    return bool(lines) and code >= CODE_SHARE * len(lines)


def plain(text: str) -> str:
    """One line of prose: whitespace collapsed, a Sphinx role left in the text read as one."""
    return " ".join(_LEFTOVER_ROLE.sub(lambda m: role_text(m.group(2), m.group(1)), text).split())


class Prose:
    """The sections of a document as they are rendered: headings open sections; paragraphs,
    list items and tables are blocks; code blocks are counted, not kept."""

    def __init__(self) -> None:
        self.title = ""
        self.sections: list[Section] = []
        self.code_blocks = 0
        self._heading = ""
        self._blocks: list[str] = []

    def heading(self, text: str) -> None:
        text = plain(text)
        if not text:
            return
        self._close()
        self.title = self.title or text
        self._heading = text
        self._blocks.append(text)

    def paragraph(self, text: str) -> None:
        if text := plain(text):
            self._blocks.append(text)

    def table(self, rows: list[list[str]]) -> None:
        self._blocks.extend(block.text for block in table_blocks(rows, "table"))

    def code(self) -> None:
        self.code_blocks += 1

    def converted(self, fallback_title: str) -> Converted:
        self._close()
        notes = [f"code blocks left out: {self.code_blocks}"] if self.code_blocks else []
        return Converted(self.title or fallback_title, self.sections, notes)

    def _close(self) -> None:
        if self._blocks:
            location = f"section {self._heading}" if self._heading else "opening"
            self.sections.append(Section(location, "\n\n".join(self._blocks)))
        self._blocks = []


# --- Markdown -----------------------------------------------------------------------------


def markdown(path: Path) -> Converted:
    prose = Prose()
    render_markdown(text_file(path), prose)
    return prose.converted(path.stem)


def render_markdown(source: str, prose: Prose) -> None:
    """Render Markdown (CommonMark, tables, MyST roles, directives and front matter) into
    `prose`."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.colon_fence import colon_fence_plugin
    from mdit_py_plugins.front_matter import front_matter_plugin
    from mdit_py_plugins.myst_blocks import myst_block_plugin
    from mdit_py_plugins.myst_role import myst_role_plugin

    parser = MarkdownIt("commonmark").enable("table")
    parser.use(front_matter_plugin).use(myst_block_plugin).use(myst_role_plugin)
    parser.use(colon_fence_plugin)
    tokens = parser.parse(source)
    at = 0
    while at < len(tokens):
        token = tokens[at]
        if token.type == "heading_open":
            prose.heading(_inline(tokens[at + 1]))
            at += 2
        elif token.type == "inline":
            prose.paragraph(_inline(token))
        elif token.type in ("fence", "colon_fence"):
            _myst_directive(token.info, token.content, prose)
        elif token.type == "code_block":
            prose.code()
        elif token.type == "html_block":
            prose.paragraph(html_text(token.content)[1])
        elif token.type == "table_open":
            close = next(i for i in range(at, len(tokens)) if tokens[i].type == "table_close")
            prose.table(_table_rows(tokens[at:close]))
            at = close
        at += 1


def _inline(token: Any) -> str:
    parts: list[str] = []
    for child in token.children or []:
        role = _ROLE_BEFORE_CODE.search(parts[-1]) if parts else None
        if child.type == "code_inline" and role:  # a Sphinx role, not MyST's
            parts[-1] = parts[-1][: role.start()]
            parts.append(role_text(child.content, role.group(1)))
        elif child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type == "myst_role":
            parts.append(role_text(child.content, child.meta.get("name", "")))
        elif child.type == "link_open" and _link_without_text(token.children, child):
            parts.append(str(child.attrs.get("href", "")).lstrip("#"))  # `[](#label)`
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)


def _link_without_text(children: list[Any], link: Any) -> bool:
    after = children[children.index(link) + 1 :]
    return bool(after) and after[0].type == "link_close"


def _table_rows(tokens: list[Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    for token in tokens:
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows:
            rows[-1].append(plain(_inline(token)))
    return rows


def _myst_directive(info: str, content: str, prose: Prose) -> None:
    """A fenced block: a MyST directive (```{name} argument) read for its prose, or code."""
    match = re.fullmatch(r"\{([\w:-]+)\}\s*(.*)", info.strip())
    if not match:
        prose.code()  # a plain fence: ```python
        return
    name, argument = match.group(1).rsplit(":", 1)[-1], match.group(2)
    if name in CODE_DIRECTIVES or looks_like_code(_directive_body(content).split("\n")):
        prose.code()
    elif name == "eval-rst":
        render_rst(content, prose)
    elif name not in DROPPED_DIRECTIVES:
        body = _directive_body(content)
        if name in VERSION_DIRECTIVES:  # "Changed in version 2.0: " + its first paragraph
            first, _, body = body.strip().partition("\n\n")
            lead = Prose()
            render_markdown(first, lead)
            text = " ".join(section.text for section in lead.converted("").sections)
            prose.paragraph(version_note(name, f"{argument} {text}"))
        render_markdown(body, prose)


def _directive_body(content: str) -> str:
    """A MyST directive's content without its options (`:key: value` lines or a `---` block)."""
    lines = content.split("\n")
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
        return "\n".join(lines[end + 1 :])
    while lines and _DIRECTIVE_OPTION.match(lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines)


# --- reStructuredText ---------------------------------------------------------------------


def rst(path: Path) -> Converted:
    prose = Prose()
    render_rst(text_file(path), prose)
    return prose.converted(path.stem)


def render_rst(source: str, prose: Prose) -> None:
    """Render reStructuredText into `prose`; Sphinx's roles and directives (which docutils does
    not know) read as a reader sees them. Includes and raw input are never followed."""
    from docutils.core import publish_doctree

    _register_sphinx_markup(source)
    settings = {
        "report_level": 5,
        "halt_level": 5,
        "file_insertion_enabled": False,  # `.. include::` would read other files
        "raw_enabled": False,
        "warning_stream": io.StringIO(),
    }
    tree = publish_doctree(source, settings_overrides=settings)
    _walk_rst(tree.children, prose)


def _walk_rst(children: Iterable[Any], prose: Prose) -> None:
    from docutils import nodes

    skipped = (  # nothing a reader reads
        nodes.system_message,
        nodes.comment,
        nodes.target,
        nodes.substitution_definition,
        nodes.raw,
        nodes.docinfo,
        nodes.pending,
        nodes.image,
    )
    stack = list(reversed(list(children)))
    while stack:
        node = stack.pop()
        if isinstance(node, nodes.literal_block | nodes.doctest_block | nodes.math_block):
            prose.code()
        elif isinstance(node, nodes.title) and isinstance(
            node.parent, nodes.section | nodes.document
        ):
            prose.heading(node.astext())
        elif isinstance(node, nodes.table):
            rows = node.findall(nodes.row)
            prose.table([[plain(e.astext()) for e in row.findall(nodes.entry)] for row in rows])
        elif isinstance(node, nodes.field):
            # `:param path: ...` reads "path: ...", as Sphinx lists the parameter
            name, body = node.children[0].astext().split()[-1], node.children[1].astext()
            prose.paragraph(f"{name}: {body}")
        elif isinstance(
            node, nodes.paragraph | nodes.term | nodes.line | nodes.caption | nodes.title
        ):
            prose.paragraph(node.astext())
        elif isinstance(node, skipped) or (
            isinstance(node, nodes.topic) and "contents" in node.get("classes", [])
        ):
            continue
        elif isinstance(node, nodes.Element):
            stack.extend(reversed(node.children))


_ROLE_NAME = re.compile(r"(?<![\w`]):((?:[\w-]+:)*[\w-]+):`")
_DIRECTIVE_NAME = re.compile(r"^\s*\.\.\s+((?:[\w-]+:)*[\w-]+)::", re.MULTILINE)
_DOCUTILS_ROLES = frozenset(
    """emphasis strong literal code math subscript superscript sub sup title-reference title
    t abbreviation ab acronym ac pep-reference pep rfc-reference rfc""".split()  # noqa: SIM905 (a readable block)
)


def _register_sphinx_markup(source: str) -> None:
    """Register, in this (converter) process, a reader's rendering of each role and directive
    `source` uses that docutils does not know: Sphinx's cross-references, descriptions,
    version notes, and any extension's."""
    from docutils.parsers.rst import directives, roles

    for name in set(_ROLE_NAME.findall(source)) - _DOCUTILS_ROLES:
        roles.register_local_role(name, _reader_role)
    for name in set(_DIRECTIVE_NAME.findall(source)):
        short = name.rsplit(":", 1)[-1]
        if short in _READER_DIRECTIVES or not _docutils_directive(name):
            directives.register_directive(name, _sphinx_directive(short))


def _docutils_directive(name: str) -> bool:
    """Whether docutils itself knows the directive `name` (an admonition, a table...)."""
    from docutils.parsers.rst import directives
    from docutils.parsers.rst.languages import en

    return name in en.directives or name in directives._directive_registry


def _reader_role(name, rawtext, text, lineno, inliner, options=None, content=None):  # noqa: ANN001, ARG001 - docutils' role signature
    from docutils import nodes, utils

    return [nodes.inline(rawtext, role_text(utils.unescape(text), name))], []


class _AnyOption(dict):
    """Every option a directive is given is accepted, its value kept as written."""

    def __missing__(self, key: str) -> Any:
        from docutils.parsers.rst import directives

        return directives.unchanged


def _sphinx_directive(name: str) -> type:
    """A directive class that renders `name` as a reader sees it: code as a literal block
    (counted, left out), dropped ones as nothing, version notes as a sentence, every other
    directive as its body (its argument too, where that is a sentence rather than a
    signature or a title)."""
    from docutils import nodes
    from docutils.parsers.rst import Directive

    class ReaderDirective(Directive):
        optional_arguments = 1
        final_argument_whitespace = True
        has_content = True
        option_spec = _AnyOption(class_=None)

        def run(self) -> list[Any]:
            if name in CODE_DIRECTIVES or looks_like_code(self.content):
                return [nodes.literal_block("", "\n".join(self.content))]
            if name in DROPPED_DIRECTIVES:
                return []
            body = nodes.container()
            argument = self.arguments[0] if self.arguments else ""
            if SENTENCE.search(argument) and name not in VERSION_DIRECTIVES:
                text, _ = self.state.inline_text(argument, self.lineno)  # `.. seealso:: The…`
                body += nodes.paragraph(argument, "", *text)
            if self.content:
                self.state.nested_parse(self.content, self.content_offset, body)
            if name in VERSION_DIRECTIVES:  # "Changed in version 2.0: " + its first paragraph
                first = body.children[0] if body.children else None
                if isinstance(first, nodes.paragraph) and len(argument.split()) == 1:
                    body.remove(first)
                    argument = f"{argument} {first.astext()}"
                body.insert(0, nodes.paragraph("", version_note(name, argument)))
            return [body]

    return ReaderDirective


# --- AsciiDoc -----------------------------------------------------------------------------

_ADOC_HEADING = re.compile(r"^(={1,6})\s+(.+)$")
_ADOC_DROPPED_LINE = re.compile(r"^(:[\w-]+:.*|\[.*\]|//.*|include::.*|\.[^\s.].*|ifdef::.*)$")
_ADOC_LIST_ITEM = re.compile(r"^(\*{1,5}|\.{1,5}|-|\d+\.)\s+")
_ADOC_ADMONITION = re.compile(r"^(NOTE|TIP|IMPORTANT|WARNING|CAUTION):\s+")
_ADOC_CODE_MARKS = "-.+/"  # listing, literal, passthrough and comment blocks: left out
_ADOC_INLINE = (
    (re.compile(r"footnote:\[[^\]]*\]"), ""),
    (re.compile(r"<<[^,>]+,\s*([^>]+)>>"), r"\1"),
    (re.compile(r"<<([^>]+)>>"), r"\1"),
    (re.compile(r"\b(?:link|xref|mailto|https?|kbd|btn|menu|pass):[^\s\[]*\[([^\]]*)\]"), r"\1"),
    (re.compile(r"(?<![\w*_`+#])([*_`#+]{1,2})(\S(?:.*?\S)?)\1(?![\w*_`+#])"), r"\2"),
)


def asciidoc(path: Path) -> Converted:
    """AsciiDoc has no maintained converter under a permissive licence: it is read as light
    markup (headings, lists, admonitions, tables, inline marks and macros; listing, literal,
    passthrough and comment blocks left out; `include::` never followed)."""
    prose, paragraph = Prose(), []
    table: list[list[str]] | None = None  # the rows of the table we are in
    fence = ""  # the delimiter of the code or comment block we are in

    def flush() -> None:
        prose.paragraph(" ".join(paragraph))
        paragraph.clear()

    for raw in text_file(path).splitlines():
        line = raw.strip()
        if fence:
            fence = "" if line == fence else fence
            continue
        if _adoc_delimiter(line):
            flush()
            if line[0] in _ADOC_CODE_MARKS:
                fence = line
                if line[0] in "-.":
                    prose.code()
            continue
        if line == "|===":
            flush()
            if table is not None:
                prose.table(table)
            table = None if table is not None else []
            continue
        if table is not None:
            if line.startswith("|"):
                table.append([_adoc_inline(cell.strip()) for cell in line.split("|")[1:]])
            continue
        heading = _ADOC_HEADING.match(line)
        if heading:
            flush()
            prose.heading(_adoc_inline(heading.group(2)))
            continue
        if not line or _ADOC_DROPPED_LINE.match(line):
            flush()
            continue
        item = _ADOC_LIST_ITEM.match(line) or _ADOC_ADMONITION.match(line)
        if item:
            flush()
            line = line[item.end() :]
        paragraph.append(_adoc_inline(line))
    flush()
    return prose.converted(path.stem)


def _adoc_delimiter(line: str) -> bool:
    """A block delimiter: four or more of one mark (`----`, `====`, `****`, `____`...), or `--`
    (an open block)."""
    return line == "--" or (len(line) >= 4 and len(set(line)) == 1 and line[0] in "-.+/=*_")


def _adoc_inline(text: str) -> str:
    for pattern, replacement in _ADOC_INLINE:
        text = pattern.sub(replacement, text)
    return text
