"""Exports name what the operator ingested without the operator's paths (`data.public_names`)."""

from __future__ import annotations

import json
from pathlib import Path

from data.documents import discover
from data.export import read_tasks
from data.public_names import public_origin, public_sources, relative_name, search_root
from tests.conftest import SAMPLE_DOCS
from tests.exported_files import machine_paths_in, this_machines_paths


def test_a_document_is_named_from_the_root_it_was_ingested_from(tmp_path):
    docs = tmp_path / "handbook"
    (docs / "guides").mkdir(parents=True)
    (docs / "guides" / "setup.md").write_text("x")
    (docs / "intro.md").write_text("x")
    assert discover([str(docs)]) == {
        docs / "guides" / "setup.md": "handbook/guides/setup.md",
        docs / "intro.md": "handbook/intro.md",
    }
    assert discover([str(docs / "intro.md")]) == {docs / "intro.md": "intro.md"}
    assert discover([str(docs / "**" / "*.md")]) == {
        docs / "guides" / "setup.md": "handbook/guides/setup.md",
        docs / "intro.md": "handbook/intro.md",
    }
    assert search_root("/a/b/*/c.md") == Path("/a/b") and search_root("x.md") == Path("x.md")
    assert relative_name(Path("/elsewhere/f.md"), docs) == "f.md"


def test_origins_keep_their_names_and_fragments_but_no_folders_or_credentials():
    assert public_origin("/home/me/traces/day1.jsonl:12") == "day1.jsonl:12"
    assert public_origin("/home/me/proxy.jsonl#support-007") == "proxy.jsonl#support-007"
    assert public_origin("file:/home/me/worlds/shop.toml") == "file:shop.toml"
    assert public_origin("/home/me/src/ledgerline") == "ledgerline"
    assert public_origin("relative/dir/repo") == "repo"
    url = "https://user:token@git.example.com:8443/org/repo.git?ref=x#frag"
    assert public_origin(url) == "https://git.example.com:8443/org/repo.git"
    assert public_origin("") == ""


def test_a_tasks_sources_use_the_recorded_document_names():
    refs = [
        {"source_id": "d1", "path": "/home/me/docs/a.md", "chunk_id": "c", "location": ""},
        {"source_id": "d2", "path": "/home/me/docs/old.md", "chunk_id": "c", "location": ""},
    ]
    named = json.loads(public_sources(json.dumps(refs), {"d1": "docs/a.md"}))
    assert [r["path"] for r in named] == ["docs/a.md", "old.md"]  # d2: an older lake, no name
    assert public_sources(None, {}) is None


def test_no_exported_file_holds_a_path_of_this_machine(docqa_taskset, agentic_taskset):
    for ctx, version in (docqa_taskset[:2], agentic_taskset):
        leaks = machine_paths_in(version, this_machines_paths(ctx.config.home))
        assert leaks == {}
        rows = read_tasks(version).to_pylist()
        paths = {ref["path"] for row in rows for ref in json.loads(row["source"])}
        assert paths and all(not p.startswith("/") for p in paths)
    rows = read_tasks(docqa_taskset[1]).to_pylist()
    documents = {ref["path"] for row in rows for ref in json.loads(row["source"])}
    assert documents <= {d.name for d in SAMPLE_DOCS.glob("*.md")}  # ingested file by file
