"""Office, PDF, e-book, notebook and markup documents: read into located sections by converters
in a limited child process, and made into tasks whose evidence is in the chunk text and whose
source names the page, slide or sheet."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from data.documents import Document, ReadLimits, read_document
from data.lake import Lake
from flows.cli import main
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.sample_formats import FACTS, LOCATIONS, pdf_bytes, write_samples

LIMITS = ReadLimits(max_bytes=10_000_000, convert_timeout_s=60, convert_memory_mb=2048)
CONFIG = """
[scope]
kinds = ["doc_qa"]
[calibrate]
method = "fixed"
k = 2
[repair]
max_steps = 0
"""


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return write_samples(tmp_path_factory.mktemp("formats"))


def test_each_format_is_read_into_located_sections(samples):
    for name, path in samples.items():
        document = read_document(path, LIMITS)
        assert isinstance(document, Document), (name, document)
        spans = {location: (start, end) for location, start, end in document.sections}
        assert LOCATIONS[name] in spans, (name, document.sections)
        start, end = spans[LOCATIONS[name]]
        section = document.text[start:end]
        assert FACTS[name] in section, (name, section)
    pdf = read_document(samples["ferry.pdf"], LIMITS)
    assert pdf.notes == ("pages without a text layer: 2",)
    html = read_document(samples["wreck.html"], LIMITS).text
    assert "News archive" not in html and "Copyright" not in html  # navigation and footer
    rst = read_document(samples["guide.rst"], LIMITS).text
    assert "include" not in rst and "root:" not in rst  # `.. include::` is not followed


def test_what_cannot_be_converted_is_refused_with_its_reason(tmp_path):
    scanned = tmp_path / "scan.pdf"
    scanned.write_bytes(pdf_bytes([[], []]))
    broken = tmp_path / "broken.docx"
    broken.write_bytes(b"PK\x03\x04 not really a document")
    notebook = tmp_path / "bad.ipynb"
    notebook.write_text('{"cells": "none"}')
    assert read_document(scanned, LIMITS).reason == "no_text_layer"
    assert read_document(broken, LIMITS).reason == "unreadable_document"
    assert read_document(notebook, LIMITS).reason == "not_a_notebook"
    slow = ReadLimits(10_000_000, convert_timeout_s=0.001, convert_memory_mb=2048)
    assert read_document(scanned, slow).reason == "conversion_timeout"
    starved = ReadLimits(1_000_000_000, convert_timeout_s=60, convert_memory_mb=256)
    big = tmp_path / "big.csv"
    big.write_text("a,b\n" + "x" * 150_000_000 + ",1\n")
    refused = read_document(big, starved)
    assert refused.reason == "conversion_failed" and "256 MiB" in refused.detail
    # the limit is the document's: a small one converts under it (a converter child that
    # imports the lake, the models or pydantic is past 256 MiB before it reads a byte)
    small = tmp_path / "small.csv"
    small.write_text("a,b\nx,1\n")
    assert isinstance(read_document(small, starved), Document)


def test_a_run_on_every_format_makes_tasks_pointing_at_their_page(samples, tmp_path):
    home = tmp_path / "home"
    config = tmp_path / "foundry.toml"
    config.write_text(CONFIG)
    folder = next(iter(samples.values())).parent
    with FakeOpenAIServer(Oracle()) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"}
        with pytest.MonkeyPatch.context() as patch:
            for key, value in {**env, "FOUNDRY_MODEL": "fake-model"}.items():
                patch.setenv(key, value)
            assert main(["run", str(folder), "--home", str(home), "--config", str(config)]) == 0
    lake = Lake(home)
    formats = {
        r["path"].rsplit("/", 1)[-1]: r["format"] for r in lake.rows("SELECT * FROM sources")
    }
    assert set(formats) == set(samples)
    chunks = {r["chunk_id"]: r for r in lake.rows("SELECT chunk_id, text, location FROM chunks")}
    version = home / "tasksets" / "docqa" / "latest"
    manifest = json.loads((version / "manifest.json").read_text())
    rows = [r for part in manifest["files"] for r in pq.read_table(version / part).to_pylist()]
    made_from = set()
    for row in rows:
        evidence = json.loads(row["evidence"])
        for quote, source in zip(evidence, json.loads(row["source"]), strict=False):
            chunk = chunks[quote["chunk_id"]]
            assert quote["quote"] in chunk["text"]
            assert source["location"] == chunk["location"]
            made_from.add(source["path"].rsplit("/", 1)[-1])
    assert made_from == set(samples), set(samples) - made_from
    located = {
        json.loads(r["source"])[0]["location"].split(" ")[0]
        for r in rows
        if json.loads(r["source"])[0]["path"].endswith((".pdf", ".pptx", ".xlsx"))
    }
    assert located == {"page", "slide", "sheet"}
