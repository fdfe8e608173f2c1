"""Markup read as a reader sees it (`data.formats.markup`): MyST and Sphinx roles and directives,
reStructuredText, AsciiDoc and notebooks become prose; code blocks are left out and counted;
list items and table rows never merge into a sentence; no markup reaches the text."""

from __future__ import annotations

import json

import pytest

from data.documents import Document, ReadLimits, read_document, split_sentences
from generators.checks import MARKUP

LIMITS = ReadLimits(max_bytes=10_000_000, convert_timeout_s=60, convert_memory_mb=2048)

MYST = """\
---
title: front matter is not text
---
(routing-label)=
# Routing

Use {func}`~flask.Flask.route` and {ref}`the routing guide <routing>` to map [URLs](http://x)
to **views**. Also :class:`flask.Blueprint` groups them.

% a comment nobody reads

:::{note}
:class: tip
The {py:class}`Rule` object holds the converters.
:::

```{eval-rst}
.. function:: url_for(endpoint, **values)
   :noindex:

   Builds a URL with :meth:`~flask.Flask.url_for`.
```

```python
app = Flask(__name__)
```

```{versionchanged} 2.2
Routes may be async.
```

- the first item without a full stop
- the second item

| Method | Meaning |
|---|---|
| GET | read |
"""

SPHINX_RST = """\
Deploying
=========

The server reads :envvar:`FLASK_APP` and :doc:`the CLI page </cli>` explains
:option:`--debug`.

.. contents::

.. code-block:: python

   app.run(debug=True)

.. py:class:: Flask(import_name)
   :canonical: flask.app.Flask

   The central object is created with :class:`~flask.Flask`.

   :param import_name: the name of the application package

.. versionadded:: 2.0 The async views.

.. seealso:: The :ref:`deploying <deploy>` chapter.

.. click:example::

   @click.command()
   def hello():
       click.echo('Hello')

.. toctree::
   :maxdepth: 2

   api
"""

ASCIIDOC = """\
= Harbour Guide
:author: Tobin Reece

Read link:https://example.org[the tide tables] and <<engines,the engine notes>> first.

[source,python]
----
tide = 5.2
----

== Engines

* The Marrow Star burned 3 tonnes of coal
* The Orla burned 2 tonnes

NOTE: The engines were replaced in 1921.

|===
|Ship |Tonnes
|Marrow Star |3
|===
"""


def read(tmp_path, name: str, text: str) -> Document:
    path = tmp_path / name
    path.write_text(text)
    document = read_document(path, LIMITS)
    assert isinstance(document, Document), document
    return document


def paragraphs(document: Document) -> list[str]:
    return document.text.split("\n\n")


def test_myst_markdown_reads_as_prose(tmp_path):
    document = read(tmp_path, "routing.md", MYST)
    assert document.title == "Routing"
    assert paragraphs(document)[:2] == [
        "Routing",
        "Use route and the routing guide to map URLs to views. Also flask.Blueprint groups them.",
    ]
    text = document.text
    assert "The Rule object holds the converters." in text  # a colon-fence admonition's body
    assert "Builds a URL with url_for." in text  # {eval-rst} read as reStructuredText
    assert "Changed in version 2.2: Routes may be async." in paragraphs(document)
    for gone in ("front matter", "routing-label", "comment", "Flask(__name__)", "tip", "{", "`"):
        assert gone not in text, gone
    assert "the first item without a full stop" in paragraphs(document)
    assert "Method | Meaning\nGET | read" in paragraphs(document)
    assert document.notes == ("code blocks left out: 1",)
    assert not MARKUP.search(text)


def test_sphinx_restructuredtext_reads_as_prose(tmp_path):
    document = read(tmp_path, "deploying.rst", SPHINX_RST)
    text = document.text
    assert paragraphs(document)[1] == (
        "The server reads FLASK_APP and the CLI page explains --debug."
    )
    assert "The central object is created with Flask." in text  # a described class's prose
    assert "import_name: the name of the application package" in text  # a field list
    assert "Added in version 2.0: The async views." in text
    assert "The deploying chapter." in text
    for gone in ("app.run", "canonical", "click.echo", "maxdepth", "toctree", "Contents", "::"):
        assert gone not in text, gone
    assert document.notes == ("code blocks left out: 2",)  # code-block and the click example
    assert not MARKUP.search(text)


def test_asciidoc_reads_as_prose(tmp_path):
    document = read(tmp_path, "guide.adoc", ASCIIDOC)
    assert document.title == "Harbour Guide"
    assert "Read the tide tables and the engine notes first." in paragraphs(document)
    engines = next(section for section in document.sections if section[0] == "section Engines")
    body = document.text[engines[1] : engines[2]].split("\n\n")
    assert body == [
        "Engines",
        "The Marrow Star burned 3 tonnes of coal",
        "The Orla burned 2 tonnes",
        "The engines were replaced in 1921.",
        "Ship | Tonnes\nMarrow Star | 3",
    ]
    assert "tide = 5.2" not in document.text and ":author:" not in document.text
    assert document.notes == ("code blocks left out: 1",)


def test_a_notebook_keeps_its_markdown_cells_and_leaves_code_out(tmp_path):
    cells = [
        {"cell_type": "markdown", "source": ["# Tides\n", "Read {func}`tide_table` first."]},
        {"cell_type": "code", "source": "print(5.2)", "outputs": []},
        {"cell_type": "markdown", "source": "```python\nx = 1\n```\nThe harbour dries out."},
    ]
    path = tmp_path / "tides.ipynb"
    path.write_text(json.dumps({"cells": cells, "nbformat": 4}))
    document = read_document(path, LIMITS)
    assert document.title == "Tides"
    assert [location for location, _, _ in document.sections] == ["cell 1", "cell 3"]
    assert document.text == "Tides\n\nRead tide_table first.\n\nThe harbour dries out."
    assert document.notes == ("code cells left out: 1",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Intro\n\nThe bridge opened in 1887. It has 3 arches.", 3),
        ("first item without a stop\n\nsecond item", 2),
        ("a line wrapped\nat eighty columns. Then a second sentence.", 2),
    ],
)
def test_a_sentence_never_runs_across_a_blank_line(text, expected):
    sentences = split_sentences(text)
    assert len(sentences) == expected
    assert all("\n\n" not in sentence for sentence in sentences)


def test_each_table_row_is_a_sentence_of_its_own():
    block = "Option | Meaning\nsubdomain | If not given, none is assumed.\nmethods | The methods."
    assert split_sentences(block) == [
        "Option | Meaning",
        "subdomain | If not given, none is assumed.",
        "methods | The methods.",
    ]


def test_a_version_note_reads_its_first_paragraph_rendered(tmp_path):
    document = read(
        tmp_path,
        "testing.md",
        "```{versionchanged} 8.4.0\nAdded the `capture` parameter.\n\nUse {func}`run`.\n```\n",
    )
    assert paragraphs(document) == [
        "Changed in version 8.4.0: Added the capture parameter.",
        "Use run.",
    ]
