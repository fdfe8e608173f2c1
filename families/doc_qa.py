"""Document QA: a question whose answer a passage of the corpus holds.

Environment: at the ladder's context levels the passages are in the prompt (`open_book`, one
reply); at its search levels the solver finds the passage with search and read tools over the
corpus (`doc_search`), or, where a user opts in with `calibrate.harness = "closed_book"`, gets
the question alone. Verify: the verifier's self-check, then the judge panel with the passage
(it must answer) and without it (it must not: the leak gate); where every judge failed its
control items, a fill-in-the-blank of a verbatim sentence meets the leak gate alone and any
other question is held (`judges.answerability`). Reviewed for rubrics and reward
hacks (`judges.hacks.ANSWERS`); the ladder runs from the evidence sentence in the prompt to a
two-hop search.
Generation: the `generate` stage, chunk -> candidate tasks (`generators.doc_qa`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from data.config import FoundryConfig
from data.documents import generic_words
from data.lake import Chunk, Direction, Task
from data.llm import Endpoint, LLMClient
from data.runtime.corpus_index import CorpusIndex
from families.base import Checked, Family, Services
from families.documents import Material, evidence_passages, materials
from families.stage import LLMStage, Outcome, StageContext, candidates_outcome, within_cap
from generators import doc_qa
from generators.checks import CheckFailure
from generators.doc_qa_variants import answered_by_source, at_level, make_variant
from generators.knobs import Level
from harnesses.base import Harness
from harnesses.doc_search import NAME as DOC_SEARCH
from harnesses.doc_search import DocSearch
from harnesses.single_turn import CLOSED_BOOK, OPEN_BOOK, SingleTurn
from judges import answerability, hacks
from judges.selfcheck import self_check

KIND = "doc_qa"


# generate: chunk -> candidate task


def pending_generate(ctx: StageContext) -> list[str]:
    """Chunks not yet through `generate`, by chunk id, within `generate.max_chunks` in all
    (none when document tasks are out of scope)."""
    if not ctx.config.scope.makes(KIND):
        return []
    chunks = [row["chunk_id"] for row in ctx.lake.rows("SELECT chunk_id FROM chunks ORDER BY 1")]
    return within_cap(ctx, "generate", chunks, ctx.config.generate.max_chunks)


@dataclass(frozen=True)
class ChunkInput:
    """A chunk to make tasks from, with the path of its source."""

    chunk: Chunk
    source_path: str
    generic: frozenset[str]  # the corpus's generic words: no answer (`data.documents.spans`)


def load_chunks(ctx: Services, chunk_ids: list[str]) -> dict[str, ChunkInput]:
    """Each chunk with the path of its source and the corpus's generic words."""
    rows = ctx.lake.rows(
        "SELECT c.*, s.path AS source_path FROM chunks c LEFT JOIN sources s USING (source_id)"
        " WHERE list_contains(?, chunk_id)",
        [chunk_ids],
    )
    documents = ctx.lake.rows(
        "SELECT string_agg(text, '\n\n' ORDER BY chunk_id) AS text FROM chunks GROUP BY source_id"
    )
    generic = generic_words([row["text"] for row in documents])
    return {
        r["chunk_id"]: ChunkInput(Chunk.from_row(r), r["source_path"] or "", generic) for r in rows
    }


async def generate_one(
    ctx: StageContext, chunk_id: str, loaded: ChunkInput, client: LLMClient
) -> Outcome:
    results = await doc_qa.generate(
        loaded.chunk, loaded.source_path, client, ctx.config.generate, loaded.generic
    )
    return candidates_outcome(ctx, "generate", chunk_id, "candidate", results)


GENERATE = LLMStage(
    "generate",
    pending_generate,
    load_chunks,
    generate_one,
    help="write candidate tasks from chunks",
)


def _doc_search(services: Services) -> Harness:
    chunks = services.lake.rows("SELECT chunk_id, text FROM chunks ORDER BY chunk_id")
    index = CorpusIndex([(r["chunk_id"], r["text"]) for r in chunks])
    return DocSearch(index, max_turns=services.config.calibrate.max_turns)


# the harnesses a document question is attempted in, by name: search over the corpus, or
# one reply with the passages in the prompt (`open_book`) or without them (`closed_book`)
HARNESSES: dict[str, Callable[[Services], Harness]] = {
    DOC_SEARCH: _doc_search,
    OPEN_BOOK: lambda services: SingleTurn(OPEN_BOOK),
    CLOSED_BOOK: lambda services: SingleTurn(CLOSED_BOOK),
}


class DocQA(Family[str, Material]):
    """Verify reads the task's passage (its evidence chunks' text); variants and siblings draw
    on its `Material`."""

    kinds = (KIND,)
    card = "doc_qa"
    task_category = "question-answering"
    stages = (GENERATE,)
    ladder = doc_qa.LADDER
    audit = hacks.ANSWERS

    def environment(self, task: Task, config: FoundryConfig, solver: Endpoint) -> str:
        if doc_qa.context_of(task) != doc_qa.SEARCH:
            return OPEN_BOOK
        return config.calibrate.harness

    def harness(self, name: str, services: Services) -> Harness:
        return HARNESSES[name](services)

    def load_for_verify(self, services: Services, tasks: Sequence[Task]) -> Mapping[str, str]:
        return evidence_passages(services, tasks)

    async def verify(self, task: Task, passage: str, llm: LLMClient, services: Services) -> Checked:
        if not passage:
            return Checked("rejected", "source_missing")
        failure = await self_check(task, llm, passage)
        if failure is not None:
            return Checked("rejected", "verifier_self_check", failure)
        decision = await answerability.judge(
            task,
            passage,
            llm,
            services.config.verify,
            answered_by_source=answered_by_source(task, passage),
        )
        return Checked(
            decision.status, decision.reason, decision.detail, decision.verdicts, decision.consensus
        )

    def load_for_variants(
        self, services: Services, tasks: Sequence[Task]
    ) -> Mapping[str, Material]:
        return materials(services, tasks)

    async def variant(
        self,
        task: Task,
        level: Level,
        direction: Direction,
        material: Material,
        llm: LLMClient,
        services: Services,
    ) -> Task:
        return await make_variant(task, level, direction, material, llm, services.config.generate)

    async def sibling(
        self, task: Task, material: Material, llm: LLMClient, services: Services
    ) -> Task:
        """A question about another fact of the passage `task` draws on, at `task`'s level."""
        loaded = load_chunks(services, [e.chunk_id for e in task.evidence[:1]])
        if not loaded:
            raise CheckFailure("source_missing")
        [chunk] = loaded.values()
        made_from_it = services.lake.rows(
            "SELECT evidence FROM tasks WHERE json_extract_string(evidence, '$[0].chunk_id') = ?",
            [chunk.chunk.chunk_id],
        )
        asked = {json.loads(row["evidence"])[0]["quote"] for row in made_from_it}
        config = services.config.generate
        fresh = await doc_qa.sibling(
            task, chunk.chunk, chunk.source_path, asked, llm, config, chunk.generic
        )
        level = doc_qa.LADDER.level(doc_qa.level_of(task))
        return await at_level(fresh, level, material, llm, config)


FAMILY = DocQA()
