"""Document QA: a question whose answer a passage of the corpus holds.

Environment: at the ladder's context levels the passages are in the prompt (`open_book`, one
reply); at its search levels the solver finds the passage with search and read tools over the
corpus (`doc_search`), or, where a user opts in with `calibrate.harness = "closed_book"`, gets
the question alone. Verify: the verifier's self-check, then the judge panel with the passage
(it must answer) and without it (it must not: the leak gate). Reviewed for rubrics and reward
hacks; the ladder runs from the evidence sentence in the prompt to a two-hop search.
"""

from __future__ import annotations

from data.config import FoundryConfig
from data.llm import LLMClient
from data.records import Task
from families.base import Checked, Family, Services
from generators import doc_qa
from generators.doc_qa_variants import Material, make_variant
from generators.knobs import Direction, Level
from harnesses.base import Harness
from harnesses.doc_search import NAME as DOC_SEARCH
from harnesses.doc_search import CorpusIndex, DocSearch
from harnesses.single_turn import OPEN_BOOK, SingleTurn
from judges import answerability
from judges.selfcheck import self_check


class DocQA(Family):
    kinds = ("doc_qa",)
    ladder = doc_qa.LADDER
    reviewed = True

    def environment(self, task: Task, config: FoundryConfig) -> str:
        if doc_qa.context_of(task) != doc_qa.SEARCH:
            return OPEN_BOOK
        return config.calibrate.harness

    def harness(self, name: str, services: Services) -> Harness:
        if name == DOC_SEARCH:
            chunks = services.lake.rows("SELECT chunk_id, text FROM chunks ORDER BY chunk_id")
            index = CorpusIndex([(r["chunk_id"], r["text"]) for r in chunks])
            return DocSearch(index, max_turns=services.config.calibrate.max_turns)
        return SingleTurn(name)

    async def verify(self, task: Task, passage: str, llm: LLMClient, services: Services) -> Checked:
        if not passage:
            return Checked("rejected", "source_missing")
        failure = await self_check(task, passage, llm)
        if failure is not None:
            return Checked("rejected", "verifier_self_check", failure)
        decision = await answerability.judge(task, passage, llm, services.config.verify)
        return Checked(decision.status, decision.reason, "", decision.verdicts, decision.consensus)

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


FAMILY = DocQA()
