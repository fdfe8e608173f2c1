"""A family loads its own typed input, as an LLM stage does: the verify stage hands `verify`
exactly what the family's `load_for_verify` returned, the repair and steering stages hand
`variant` exactly what its `load_for_variants` returned, and those generic stages read no chunk
for a family that did not ask for one (its tasks' evidence points at chunks all the same)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from data.config import FoundryConfig
from data.lake import (
    Direction,
    Evidence,
    ExactOrF1Spec,
    Lineage,
    Message,
    SourceRef,
    Status,
    Task,
)
from data.llm import Endpoint, LLMClient
from families import registered
from families.base import Checked, Family, Services
from families.documents import Material
from families.stage import StageContext
from flows.stages import stage_named, steering, steering_stage_name
from generators.knobs import Ladder, Level
from harnesses.base import Harness
from harnesses.single_turn import SingleTurn
from sources.documents import ingest_docs
from tests.conftest import SAMPLE_DOCS, make_context
from tests.fakes.scripted_llm import ScriptedLLM

KIND = "tally"
LADDER = Ladder((Level("base", {}), Level("steeper", {})), base="base")
CHUNKS = re.compile(r"\bchunks\b")


@dataclass(frozen=True)
class Ledger:
    """What a tally task is checked against: nothing a generic stage would know to load."""

    task_id: str
    sealed: str


@dataclass(frozen=True)
class Stockpile:
    """What a tally task's variants draw on."""

    task_id: str
    count: int


class Tally(Family[Ledger, Stockpile]):
    """A family defined here only: its loaders and hooks record what they were given."""

    kinds = (KIND,)
    ladder = LADDER

    def __init__(self) -> None:
        self.loads: list[tuple[str, list[str]]] = []  # (loader, task ids asked for)
        self.given: dict[str, dict[str, object]] = {"verify": {}, "variant": {}}
        # what its loaders returned first for each task (the hooks run on the first load)
        self.returned: dict[str, dict[str, object]] = {"verify": {}, "variant": {}}

    def environment(self, task: Task, config: FoundryConfig, solver: Endpoint) -> str:
        return "tally_closed"

    def harness(self, name: str, services: Services) -> Harness:
        return SingleTurn(name)

    def load_for_verify(self, services: Services, tasks: Sequence[Task]) -> dict[str, Ledger]:
        self.loads.append(("verify", sorted(t.task_id for t in tasks)))
        loaded = {t.task_id: Ledger(t.task_id, f"sealed-{t.answer}") for t in tasks}
        for task_id, value in loaded.items():
            self.returned["verify"].setdefault(task_id, value)
        return loaded

    async def verify(
        self, task: Task, loaded: Ledger, llm: LLMClient, services: Services
    ) -> Checked:
        self.given["verify"][task.task_id] = loaded
        return Checked("done", "tallied")

    def load_for_variants(self, services: Services, tasks: Sequence[Task]) -> dict[str, Stockpile]:
        self.loads.append(("variants", sorted(t.task_id for t in tasks)))
        loaded = {t.task_id: Stockpile(t.task_id, len(t.answer)) for t in tasks}
        for task_id, value in loaded.items():
            self.returned["variant"].setdefault(task_id, value)
        return loaded

    async def variant(
        self,
        task: Task,
        level: Level,
        direction: Direction,
        material: Stockpile,
        llm: LLMClient,
        services: Services,
    ) -> Task:
        self.given["variant"][task.task_id] = material
        question = f"{task.question} ({level.name})"
        return tally_task(task.evidence[0], question, task.answer, level.name)


def tally_task(evidence: Evidence, question: str, answer: str, level: str = "base") -> Task:
    prompt = [Message(role="user", content=question)]
    verifier = ExactOrF1Spec()
    return Task(
        task_id=Task.make_id(KIND, prompt, answer, verifier),
        kind=KIND,
        prompt=prompt,
        answer=answer,
        verifier=verifier,
        evidence=[evidence],
        source=[SourceRef(source_id="s", path="", chunk_id=evidence.chunk_id)],
        lineage=Lineage(
            generator="tally", generator_version="1", prompt_hash="", model="", seed="",
            knobs={"level": level},
        ),
    )  # fmt: skip


@pytest.fixture
def tally_lake(tmp_path) -> tuple[StageContext, list[Task]]:
    """A lake with chunks and two tally tasks whose evidence points at them, both measured too
    easy (so repair takes them)."""
    ctx = make_context(tmp_path / "home", repair={"max_steps": 1})
    ingest_docs([str(SAMPLE_DOCS / "orvanne-bridge.md")], ctx)
    chunks = ctx.lake.records("chunks")
    assert chunks
    evidence = Evidence(chunk_id=chunks[0].chunk_id, quote=chunks[0].text[:40])
    made = [tally_task(evidence, f"How many in {i}?", str(i)) for i in (3, 4)]
    tasks = sorted(made, key=lambda task: task.task_id)
    ctx.lake.write("tasks", tasks, ctx.run_id)
    measured = [
        Status.now("calibrate", t.task_id, "done", "too_easy", "", "earlier") for t in tasks
    ]
    ctx.lake.write("status", measured, "earlier")
    return ctx, tasks


def spy_on_chunk_reads(ctx: StageContext, monkeypatch) -> list[str]:
    """Every query the lake runs that names the chunks table, as it runs."""
    reads: list[str] = []
    rows = ctx.lake.rows

    def spied(sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        if CHUNKS.search(sql):
            reads.append(sql)
        return rows(sql, params)

    monkeypatch.setattr(ctx.lake, "rows", spied)
    return reads


def run_stage(ctx: StageContext, name: str, ids: list[str]) -> dict[str, Status]:
    """`name`'s load over `ids`, then its work on each, as `flows.stage_runs` does."""
    stage = stage_named(name)
    inputs = stage.load(ctx, ids)
    llm = ScriptedLLM(lambda *_: pytest.fail("no model is asked"))
    return {i: asyncio.run(stage.work(ctx, i, inputs[i], llm)).status for i in ids}


def test_a_family_gets_in_its_hooks_what_its_loaders_returned_and_no_chunk(tally_lake, monkeypatch):
    ctx, tasks = tally_lake
    ids = [t.task_id for t in tasks]
    family = Tally()
    with registered(family):
        reads = spy_on_chunk_reads(ctx, monkeypatch)
        verified = run_stage(ctx, "verify", ids)
        repaired = run_stage(ctx, "repair", ids)
        steer = steering(steering_stage_name(1, "policy"), ids)
        steered = steer.load(ctx, ids)

    assert {s.reason for s in verified.values()} == {"tallied"}
    assert {s.reason for s in repaired.values()} == {"repaired"}
    # each loader asked once per stage, for exactly this batch's tally tasks
    assert family.loads == [("verify", ids), ("variants", ids), ("variants", ids)]
    # the hooks got the very objects the loaders returned, task by task
    for hook in ("verify", "variant"):
        assert family.given[hook].keys() == set(ids)
        for task_id, given in family.given[hook].items():
            assert given is family.returned[hook][task_id]
    assert all(steered[i].repair.material == Stockpile(i, 1) for i in ids)
    assert reads == []  # the generic stages read no chunk for a family that asked for none


def test_a_batch_of_two_families_gives_each_only_its_own(tally_lake, monkeypatch):
    """A document task beside the tally tasks: its family loads its passages and material, the
    tally family its own, and no chunk read is for a tally task's evidence."""
    ctx, tasks = tally_lake
    doc_chunk = ctx.lake.records("chunks")[-1]
    tally_chunks = {e.chunk_id for t in tasks for e in t.evidence}
    assert doc_chunk.chunk_id not in tally_chunks
    doc_task = tally_task(Evidence(chunk_id=doc_chunk.chunk_id, quote="x"), "Where?", "here")
    doc_task = doc_task.model_copy(update={"kind": "doc_qa", "task_id": "doc-task"})
    ctx.lake.write("tasks", [doc_task], ctx.run_id)
    tally_ids = [t.task_id for t in tasks]
    ids = [doc_task.task_id, *tally_ids]
    family = Tally()
    params: list[Sequence[Any]] = []
    with registered(family):
        rows = ctx.lake.rows

        def spied(sql: str, given: Sequence[Any] = ()) -> list[dict[str, Any]]:
            if CHUNKS.search(sql):
                params.append(given)
            return rows(sql, given)

        monkeypatch.setattr(ctx.lake, "rows", spied)
        to_verify = stage_named("verify").load(ctx, ids)
        to_repair = stage_named("repair").load(ctx, ids)

    assert family.loads == [("verify", tally_ids), ("variants", tally_ids)]
    assert to_verify[doc_task.task_id].loaded == doc_chunk.text  # doc_qa's passage
    material = to_repair[doc_task.task_id].material
    assert isinstance(material, Material) and material.passage == doc_chunk.text
    for task_id in tally_ids:
        assert to_verify[task_id].loaded is family.returned["verify"][task_id]
        assert to_repair[task_id].material is family.returned["variant"][task_id]
    asked = {chunk_id for given in params for p in given if isinstance(p, list) for chunk_id in p}
    assert params and doc_chunk.chunk_id in asked and not asked & tally_chunks
