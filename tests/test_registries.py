"""A new source type, sandbox stage or trainer projection is one module and one registry line:
each is defined here and nowhere else, registered for a test, and the CLI offers it and the
flows run it like a shipped one, with nothing in `flows/` naming it. (A new LLM family is
`tests/test_family_registry.py`'s case; a new verifier type `tests/test_verifier_types.py`'s.)"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import Field

from data.config import ConfigError, FoundryConfig, Settings, extension_settings, load_config
from data.documents import ingest_documents
from data.export import Grouping, canonical_rows, formats, project
from data.export import registered as registered_projection
from data.export.projections.base import Inputs, Projector, Row
from data.lake import Lake
from families import registered as registered_family
from families import sandbox_stages
from families.stage import SandboxStage, StageContext, pending_items
from flows.cli import main
from flows.commands import build_parser
from flows.pipeline import run_config
from flows.run_plan import estimate_run
from flows.stages import check_extensions
from judges.verifier_types import package_graders
from sources import groupings
from sources import registered as registered_source
from sources.base import Source
from sources.documents import estimate_chunks
from tests.conftest import SAMPLE_DOCS, SMALL_RUN_CONFIG
from tests.test_family_registry import KIND, WordCount

# --- a source type: plain-text notes, read as documents, each note its own split group, with
# a setting of its own that caps the notes a run reads --------------------------------------


class NotesSettings(Settings):
    max_notes: int | None = Field(default=None, ge=1)  # notes read per call, first ones first


def capped(items: list[str], config: FoundryConfig) -> list[str]:
    return items[: extension_settings(config, "notes", NotesSettings).max_notes]


def read_notes(items: list[str], ctx: StageContext, options: Mapping[str, Any]) -> dict[str, Any]:
    kept = capped(items, ctx.config)
    counts = ingest_documents(kept, ctx.lake, ctx.config.ingest, ctx.run_id, ctx.progress)
    label = options.get("label", "notes")
    return {f"{label}:{outcome}": n for outcome, n in counts.items()} | (
        {f"{label}:capped": len(items) - len(kept)} if len(kept) < len(items) else {}
    )


def estimate_notes(items: list[str], config: FoundryConfig, lake: Lake) -> int:
    return estimate_chunks(capped(items, config), config, lake)


NOTES = Source(
    name="notes",
    help="plain-text notes",
    items="note files",
    read=read_notes,
    tables=("sources",),
    sample=lambda ctx: [],
    grouping=Grouping("notes", "note: the note a task counts the words of", lambda row: []),
    unit_stage="generate",  # its notes are chunked as documents are
    estimate=estimate_notes,
    options={"label": "what to call the notes in the counts"},
    settings=NotesSettings,
)

# --- a sandbox stage: each ingested document checked once, before the LLM stages -------------

CHECK = "note_check"


def pending_checks(ctx: StageContext) -> list[str]:
    return pending_items(ctx, CHECK, "SELECT source_id AS id FROM sources ORDER BY source_id")


def check_notes(ctx: StageContext) -> Counter:
    statuses = [ctx.status(CHECK, item, "done", "checked") for item in pending_checks(ctx)]
    ctx.lake.write("status", statuses, ctx.run_id)
    return Counter(f"{s.status}:{s.reason}" for s in statuses)


class CheckedWordCount(WordCount):
    sandbox_stages = (SandboxStage(CHECK, pending_checks, check_notes, help="check each note"),)


def test_a_source_type_and_a_sandbox_stage_run_through_the_cli(
    tmp_path, monkeypatch, oracle_server, capsys
):
    monkeypatch.setenv("OPENAI_BASE_URL", oracle_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    notes = [str(p) for p in sorted(SAMPLE_DOCS.glob("*.md"))[:2]]
    home = str(tmp_path / "home")
    with registered_source(NOTES), registered_family(CheckedWordCount()):
        assert main(["ingest", "notes", *notes, "--label", "memo", "--home", home]) == 0
        assert json.loads(capsys.readouterr().out)["memo:ingested"] == 2
        assert main(["note-check", "--home", home]) == 0  # its own command and flow
        assert json.loads(capsys.readouterr().out) == {"done:checked": 2}
        assert groupings()[-1] is NOTES.grouping  # offered a row after the shipped types

        config = tmp_path / "foundry.toml"
        config.write_text(SMALL_RUN_CONFIG)
        run_home = tmp_path / "run"
        run = ["run", "--home", str(run_home), "--config", str(config), "--kind", KIND]
        assert main([*run, "--notes", *notes]) == 0
        lake = Lake(run_home)
        checked = lake.rows("SELECT item_id FROM status WHERE stage = ?", [CHECK])
        assert len(checked) == 2  # the pipeline ran the sandbox stage
        manifest = json.loads((run_home / "tasksets/docqa/latest/manifest.json").read_text())
        assert manifest["n_tasks"] > 0 and set(manifest["by_kind"]) == {KIND}
        assert manifest["split"]["grouping"]["notes"] == NOTES.grouping.text
    assert CHECK not in [stage.name for stage in sandbox_stages()]  # for the test only
    with pytest.raises(SystemExit):
        build_parser().parse_args(["ingest", "notes", *notes])


def test_a_source_s_own_setting_caps_what_it_reads_and_what_the_plan_counts(tmp_path, capsys):
    notes = [str(p) for p in sorted(SAMPLE_DOCS.glob("*.md"))[:3]]
    config = tmp_path / "foundry.toml"
    config.write_text("[extensions.notes]\nmax_notes = 1\n")
    home = ["--home", str(tmp_path / "home"), "--config", str(config)]
    fresh = load_config(config, tmp_path / "home")
    with registered_source(NOTES):
        plan = estimate_run({"notes": notes}, fresh)
        assert plan.units["notes"] == estimate_chunks(notes[:1], fresh, Lake(fresh.home)) > 0
        assert main(["ingest", "notes", *notes, *home]) == 0
        counts = json.loads(capsys.readouterr().out)
        assert (counts["notes:ingested"], counts["notes:capped"]) == (1, 2)
        config.write_text("[extensions.notes]\nmax_notes = 0\n")
        with pytest.raises(ConfigError, match=r"extensions\.notes\.max_notes"):
            check_extensions(load_config(config))
    config.write_text("[extensions.notes]\nmax_notes = 1\n")  # no source declares it now
    with pytest.raises(ConfigError, match=r"extensions\.notes: no registered family or source"):
        run_config(None, str(config))  # where every run starts


# --- a trainer projection: the tasks as JSON lines ---------------------------------------------


def write_jsonl(out, version, tasks: list[Row], inputs: Inputs) -> tuple[int, dict[str, int]]:
    lines = [json.dumps({"prompt": t["prompt"], "answer": t["answer"]}) for t in tasks]
    (out / "tasks.jsonl").write_text("".join(line + "\n" for line in lines))
    return len(lines), {}


def test_a_projection_is_offered_by_export_and_written_beside_the_version(docqa_taskset, tmp_path):
    ctx, shipped, _ = docqa_taskset
    version = shutil.copytree(shipped, tmp_path / shipped.name)
    jsonl = Projector("jsonl", "prompt and answer per line", write_jsonl)
    with registered_projection(jsonl):
        assert build_parser().parse_args(["export", "--format", "jsonl"]).formats == ["jsonl"]
        assert "jsonl" in formats()
        made = project(version, "jsonl", ctx.lake, graders=package_graders())
    lines = (version / "jsonl" / "tasks.jsonl").read_text().splitlines()
    assert made.rows == len(lines) == len(canonical_rows(version)) > 0
    assert json.loads((version / "jsonl" / "projection.json").read_text())["rows"] == made.rows
    assert "jsonl" not in formats()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["export", "--format", "jsonl"])
