"""A task family is one module and one registration: `word_count`, defined here and nowhere
else, is registered for a test and goes through generate, verify, calibrate and export like a
shipped family; a scope naming a kind no registered family makes is refused in one line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pydantic import Field

import data.export.environments as environments
from data.config import ConfigError, FoundryConfig, Settings
from data.export import Environment, environment_of, export_taskset, project, read_tasks
from data.lake import Chunk, Evidence, ExactOrF1Spec, Lineage, Message, SourceRef, Task
from data.llm import Endpoint, LLMClient
from families import export_kinds, family_of, generation_stages, registered
from families.base import Checked, Family, Services
from families.stage import LLMStage, Outcome, StageContext, candidates_outcome, pending_items
from flows.cli import main
from flows.pipeline import stage_context
from flows.stages import check_extensions, check_kinds, llm_stages, stage_named
from generators.candidates import Candidate, Rejection
from harnesses.base import Harness
from harnesses.single_turn import SingleTurn
from harnesses.train_environments import (
    TRAINING,
    Training,
    environments_for,
    tools_of,
    training_of,
)
from judges.verifier_types import package_graders
from sources import groupings
from sources.documents import ingest_docs
from tests.conftest import SAMPLE_DOCS, endpoints_for, make_context, run_llm_stages
from tests.test_import_direction import LAYERS, ROOT

KIND = "word_count"
STAGE = "word_count_tasks"
ENVIRONMENT = "word_count_closed"
QUESTION = "How many words are in this passage?"
MAX_WORDS = 40  # the passage: a chunk's first words
MIN_WORDS = 5
SHIPPED_STAGES = [
    "generate",
    "describe",
    "sequence",
    "intents",
    "trace_tasks",
    "trace_worlds",
    "world_tasks",
    "reports",
]


# --- the family: its generation stage over chunks (no model asked), its check, its harness ----


def pending_chunks(ctx: StageContext) -> list[str]:
    """Chunks not through `word_count_tasks` yet (none when the kind is out of scope)."""
    if not ctx.config.scope.makes(KIND):
        return []
    return pending_items(ctx, STAGE, "SELECT chunk_id AS id FROM chunks ORDER BY chunk_id")


def load_chunks(ctx: Services, chunk_ids: list[str]) -> dict[str, Chunk]:
    chunks = ctx.lake.records("chunks", "list_contains(?, chunk_id)", [chunk_ids])
    return {chunk.chunk_id: chunk for chunk in chunks}


class WordCountSettings(Settings):
    """The family's own settings: `[extensions.word_count]`."""

    min_words: int = Field(default=MIN_WORDS, ge=1)  # a shorter passage makes no task


async def count_words(ctx: StageContext, chunk_id: str, chunk: Chunk, client: LLMClient) -> Outcome:
    """One task per chunk: how many words its first words are."""
    words = chunk.text.split()[:MAX_WORDS]
    settings = family_of(KIND).settings_in(ctx.config)
    if len(words) < settings.min_words:
        results: list[Candidate | Rejection] = [
            Rejection("0", "passage_too_short", f"{len(words)} words")
        ]
    else:
        results = [Candidate("0", word_count_task(chunk, " ".join(words)))]
    return candidates_outcome(ctx, STAGE, chunk_id, "word_count_candidate", results)


def word_count_task(chunk: Chunk, passage: str) -> Task:
    prompt = [Message(role="user", content=f"{QUESTION}\n\n{passage}")]
    answer = str(len(passage.split()))
    verifier = ExactOrF1Spec()
    return Task(
        task_id=Task.make_id(KIND, prompt, answer, verifier),
        kind=KIND,
        prompt=prompt,
        answer=answer,
        verifier=verifier,
        evidence=[Evidence(chunk_id=chunk.chunk_id, quote=passage)],
        source=[SourceRef(source_id=chunk.source_id, path="", chunk_id=chunk.chunk_id)],
        lineage=Lineage(
            generator="word_count", generator_version="1", prompt_hash="", model="", seed=""
        ),
    )


class WordCount(Family):
    kinds = (KIND,)
    stages = (LLMStage(STAGE, pending_chunks, load_chunks, count_words),)
    settings = WordCountSettings

    def environment(self, task: Task, config: FoundryConfig, solver: Endpoint) -> str:
        return ENVIRONMENT

    def harness(self, name: str, services: Services) -> Harness:
        return SingleTurn(name)

    def load_for_verify(self, services: Services, tasks: Sequence[Task]) -> dict[str, str]:
        """Each task's chunk: the text its quote must open."""
        chunk_ids = [task.evidence[0].chunk_id for task in tasks]
        texts = {chunk.chunk_id: chunk.text for chunk in load_chunks(services, chunk_ids).values()}
        return {task.task_id: texts.get(task.evidence[0].chunk_id, "") for task in tasks}

    async def verify(self, task: Task, passage: str, llm: LLMClient, services: Services) -> Checked:
        """The quote opens the chunk and the gold is its number of words."""
        quote = task.evidence[0].quote
        if not " ".join(passage.split()).startswith(quote):
            return Checked("rejected", "quote_not_in_passage")
        if task.answer != str(len(quote.split())):
            return Checked("rejected", "count_wrong", task.answer)
        return Checked("done", "count_checked")


# --- tests ------------------------------------------------------------------------------------


def word_count_run(tmp_path: Path) -> StageContext:
    """A home with two sample documents ingested, scoped to the family's kind."""
    home = tmp_path / "home"
    ctx = make_context(home, scope={"kinds": [KIND]}, calibrate={"k": 2, "method": "fixed"})
    ingest_docs([str(p) for p in sorted(SAMPLE_DOCS.glob("*.md"))[:2]], ctx)
    return ctx


def test_a_family_registered_in_a_test_runs_from_generate_to_export(tmp_path, oracle_server):
    ctx = word_count_run(tmp_path)
    chunks = ctx.lake.rows("SELECT chunk_id FROM chunks")
    with registered(WordCount()):
        check_kinds(ctx.config.scope.kinds)
        names = [stage.name for stage in llm_stages()]
        assert names == [
            "controls",
            *SHIPPED_STAGES,
            STAGE,
            "verify",
            "calibrate",
            "review",
            "repair",
            "revise",
        ]
        assert stage_named(STAGE).work is count_words  # the runners find a batch's stage by name
        run_llm_stages(ctx, endpoints_for(oracle_server))
        result = export_taskset(
            ctx.lake, "words", tmp_path / "tasksets", kinds=export_kinds(), groupings=groupings()
        )
    assert STAGE not in [stage.name for stage in llm_stages()]  # registered for the test only

    tasks = {t.task_id: t for t in ctx.lake.records("tasks")}
    assert chunks and len(tasks) == len(chunks)
    assert {t.kind for t in tasks.values()} == {KIND}  # the shipped families made nothing
    statuses = ctx.lake.rows("SELECT stage, item_id, status, reason, detail FROM status")
    verified = {r["item_id"]: r["reason"] for r in statuses if r["stage"] == "verify"}
    assert verified == {task_id: "count_checked" for task_id in tasks}
    calibrated = [r for r in statuses if r["stage"] == "calibrate"]
    assert sorted(r["item_id"] for r in calibrated) == sorted(tasks)
    assert {r["status"] for r in calibrated} == {"done"}
    attempts = ctx.lake.rows("SELECT task_id, harness FROM attempts")
    assert len(attempts) == 2 * len(tasks) and {a["harness"] for a in attempts} == {ENVIRONMENT}
    difficulty = ctx.lake.rows("SELECT task_id, stage, solver_model, harness FROM difficulty")
    assert sorted(d["task_id"] for d in difficulty) == sorted(tasks)
    measured = {(d["stage"], d["solver_model"], d["harness"]) for d in difficulty}
    assert measured == {("calibrate", "fake-model", ENVIRONMENT)}

    rows = read_tasks(result.path).to_pylist()
    assert result.n_tasks == len(tasks) and sorted(r["task_id"] for r in rows) == sorted(tasks)
    assert all(r["kind"] == KIND and r["harness"] == ENVIRONMENT for r in rows)
    assert all(r["answer"] == str(len(tasks[r["task_id"]].evidence[0].quote.split())) for r in rows)


def test_a_stage_two_families_declare_runs_once_and_a_namesake_is_refused():
    assert [stage.name for stage in generation_stages()] == SHIPPED_STAGES  # intents: once
    with registered(WordCount()):
        assert [stage.name for stage in generation_stages()] == [*SHIPPED_STAGES, STAGE]

    class Namesake(WordCount):
        kinds = ("word_count_namesake",)
        stages = (LLMStage("generate", pending_chunks, load_chunks, count_words),)

    with registered(Namesake()), pytest.raises(ValueError, match="'generate'"):
        generation_stages()


def test_a_scope_naming_an_unknown_kind_is_refused_in_one_line(tmp_path, capsys):
    home = str(tmp_path / "home")
    assert main(["run", "--home", home, "--kind", "doc_qa", "--kind", "essay"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("foundry: scope.kinds: no task family makes 'essay' (known kinds: doc_qa")
    assert "\n" not in err and "world_tool_use" in err
    config = tmp_path / "foundry.toml"
    config.write_text('[scope]\nkinds = ["word_count"]\n')
    assert main(["verify", "--home", home, "--config", str(config)]) == 2
    assert "no task family makes 'word_count'" in capsys.readouterr().err
    with registered(WordCount()):
        check_kinds(["word_count", "doc_qa"])  # registered: known
    with pytest.raises(ConfigError, match="no task family makes 'word_count'"):
        check_kinds(["word_count"])
    overrides = {"scope": {"kinds": ["essay"]}}  # a deployment's form, say
    with pytest.raises(ConfigError, match="'essay'"), stage_context("run", home, None, overrides):
        pass


def test_the_family_s_own_settings_come_from_its_extensions_table(tmp_path, oracle_server):
    ctx = make_context(
        tmp_path / "home", scope={"kinds": [KIND]}, extensions={KIND: {"min_words": MAX_WORDS + 1}}
    )
    ingest_docs([str(sorted(SAMPLE_DOCS.glob("*.md"))[0])], ctx)
    with registered(WordCount()):
        check_extensions(ctx.config)
        run_llm_stages(ctx, endpoints_for(oracle_server), [stage_named(STAGE)])
    assert not ctx.lake.rows("SELECT 1 FROM tasks")  # every passage is under the setting
    rows = ctx.lake.rows("SELECT DISTINCT reason FROM status WHERE stage = 'word_count_candidate'")
    assert [r["reason"] for r in rows] == ["passage_too_short"]
    bad = make_context(tmp_path / "bad", extensions={KIND: {"min_words": 0}})
    with registered(WordCount()), pytest.raises(ConfigError, match=r"extensions\.word_count"):
        check_extensions(bad.config)


# --- a tool environment of its own, defined here too ------------------------------------------

TOOLS = "word_counter"  # the exported environment: what the package's tool server must offer


class WordCounter:
    """The training environment of `TOOLS`: one tool, which counts words."""

    def reset(self, **row: object) -> None:
        return None

    def count_words(self, text: str) -> str:
        """The number of words in a text.

        Args:
            text: the words to count
        """
        return str(len(text.split()))


def test_a_tool_environment_defined_in_a_test_is_exported_and_trained_in(
    tmp_path, oracle_server, monkeypatch
):
    """The recipe's tool environment: its record ahead of the shipped ones in
    `data/export/environments.py` and its training side in `TRAINING`, both added here. The
    family's rows are exported in it, the trainer builds its class for them, the warm start finds
    its training side, Harbor leaves them out as tools it does not serve, and the verifiers
    package names the tool set its server must offer (the shipped `taskset_package/tools.py`,
    which runs inside the package, is the one file a real one adds to)."""
    counter = Environment(
        TOOLS, claims=lambda row: row["harness"] == ENVIRONMENT, max_turns=lambda row, n: 3
    )
    monkeypatch.setattr(environments, "REGISTERED", [counter, *environments.REGISTERED])
    training = Training(
        TOOLS,
        named=lambda row: TOOLS,
        factory=lambda row, version, calls: WordCounter,
        gold_calls=lambda row: None,
    )
    monkeypatch.setitem(TRAINING, TOOLS, training)
    ctx = word_count_run(tmp_path)
    with registered(WordCount()):
        run_llm_stages(ctx, endpoints_for(oracle_server))
        version = export_taskset(
            ctx.lake, "words", tmp_path / "tasksets", kinds=export_kinds(), groupings=groupings()
        ).path
    rows = read_tasks(version).to_pylist()
    assert rows and {environment_of(row).name for row in rows} == {TOOLS}

    found = environments_for(rows, version, max_calls=4)
    assert found.names == [TOOLS] * len(rows) and found.left_out == {}
    assert found.factories == {TOOLS: WordCounter} and training_of(TOOLS) is training
    assert [tool.__name__ for tool in tools_of(WordCounter)] == ["count_words"]

    harbor = project(version, "harbor", ctx.lake, graders=package_graders())
    assert harbor.rows == 0 and harbor.skipped == {f"tools_{TOOLS}": len(rows)}
    package = project(version, "verifiers", ctx.lake, graders=package_graders())
    tables = [pq.read_table(p) for p in package.path.rglob("*.parquet")]
    toolsets = [name for t in tables if "toolset" in t.column_names for name in t["toolset"]]
    assert len(toolsets) == len(rows) and {name.as_py() for name in toolsets} == {TOOLS}


def test_nothing_outside_the_tests_names_the_family_or_its_setting():
    """The recipe's claim, counted: the family, its stage, its environment, its tool environment
    and tool, and its setting are named in this module (and the registry test that reuses it),
    in no product file."""
    names = (KIND, STAGE, ENVIRONMENT, TOOLS, "min_words", "count_words")
    product = [p for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))]
    naming = [str(p.relative_to(ROOT)) for p in product if any(n in p.read_text() for n in names)]
    assert naming == []
