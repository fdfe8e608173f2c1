"""Document reports: a request whose answer is a short report drawing on several passages of
one document, graded fact by fact.

Generation: the `reports` stage, document -> one candidate (`generators.doc_report`), for up to
`reports.max_reports` documents (none by default: each report costs a panel's long replies in
verification and calibration). Environment: `open_book`, one reply with the passages in the
prompt (a report needs every passage it draws on; a search within a few turns rarely finds them
all). Verify: the rubric's facts are quoted verbatim from their passages and come from at least
two of them, the verifier's self-check (the reference report passes, the empty reply and the
report without its last passage's facts fail), then the judge panel writes reports with the
passages (every fact must be met) and without them (the leak gate). Grading: the verifier is a
`by_item` rubric (`judges.rubric_grade`): the panel's majority decides each fact, the reward is
the share met and a pass is every fact met, the same in calibration, review and a trainer's
judge reward. Reviewed (`judges.hacks.REPORTS`): failed reports are distilled into the facts they
left out, rewarded ones audited for reward hacks and remedied with rubric items. Ladder
(`generators.doc_report.LADDER`): an outline of the facts asked for, the passages alone, or
the passages among distractors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from data.config import CalibrateConfig, FoundryConfig
from data.lake import Chunk, Direction, Task
from data.llm import Endpoint, LLMClient
from families.base import Checked, Family, Services
from families.documents import Neighbour, chunk_texts, neighbours
from families.stage import LLMStage, Outcome, StageContext, candidates_outcome, within_cap
from generators import doc_report
from generators.checks import CheckFailure
from generators.knobs import Level
from harnesses.base import Harness
from harnesses.single_turn import OPEN_BOOK, SingleTurn
from judges import answerability, hacks
from judges.selfcheck import self_check

KIND = doc_report.KIND
STAGE = "reports"


def pending_reports(ctx: StageContext) -> list[str]:
    """Documents with enough passages for a report, not yet through `reports`, by source id,
    within `reports.max_reports` in all (none when reports are out of scope)."""
    if not ctx.config.scope.makes(KIND):
        return []
    sql = (
        "SELECT source_id FROM chunks GROUP BY source_id"
        f" HAVING count(*) >= {int(ctx.config.reports.passages)} ORDER BY source_id"
    )
    documents = [row["source_id"] for row in ctx.lake.rows(sql)]
    return within_cap(ctx, STAGE, documents, ctx.config.reports.max_reports)


def load_documents(ctx: Services, source_ids: list[str]) -> dict[str, doc_report.Document]:
    """Each document's chunks in source order, with its path and title."""
    rows = ctx.lake.rows(
        "SELECT c.*, s.path AS source_path, s.title AS source_title FROM chunks c"
        " LEFT JOIN sources s USING (source_id) WHERE list_contains(?, source_id)"
        ' ORDER BY source_id, "index"',
        [source_ids],
    )
    documents: dict[str, doc_report.Document] = {}
    for row in rows:
        source_id = row["source_id"]
        if source_id not in documents:
            path, title = row["source_path"] or "", row["source_title"] or ""
            documents[source_id] = doc_report.Document(source_id, path, title, [])
        documents[source_id].chunks.append(Chunk.from_row(row))
    return documents


async def report_one(
    ctx: StageContext, source_id: str, document: doc_report.Document, client: LLMClient
) -> Outcome:
    config = ctx.config
    results = await doc_report.generate(
        document, client, config.reports, config.generate.temperature
    )
    return candidates_outcome(ctx, STAGE, source_id, "report_candidate", results)


REPORTS = LLMStage(
    STAGE,
    pending_reports,
    load_documents,
    report_one,
    help="report tasks: a report brief from each document, graded by its rubric",
)


@dataclass(frozen=True)
class Passages:
    """The text of a report task's passages: by chunk id, and joined in source order."""

    texts: dict[str, str]
    joined: str


@dataclass(frozen=True)
class ReportMaterial:
    """What a report task's variants draw on: its passages, and the chunks nearest its first
    evidence chunk by embedding (its distractors, those not among its passages)."""

    passages: Passages
    neighbours: list[Neighbour]


def passages_of(services: Services, tasks: Sequence[Task]) -> dict[str, Passages]:
    """The lake's text of the passages each of `tasks` draws on (those it still holds)."""
    held = chunk_texts(services, (ref.chunk_id for task in tasks for ref in task.source))
    found: dict[str, Passages] = {}
    for task in tasks:
        ids = [ref.chunk_id for ref in task.source]
        texts = {i: held[i] for i in ids if i in held}
        found[task.task_id] = Passages(texts, "\n\n".join(texts[i] for i in ids if i in texts))
    return found


class DocReport(Family[Passages, ReportMaterial]):
    """Verify reads the task's passages; variants draw on them and their neighbours."""

    kinds = (KIND,)
    card = "doc_report"
    task_category = "summarization"
    stages = (REPORTS,)
    ladder = doc_report.LADDER
    audit = hacks.REPORTS

    def environment(self, task: Task, config: FoundryConfig, solver: Endpoint) -> str:
        return OPEN_BOOK

    def harness(self, name: str, services: Services) -> Harness:
        return SingleTurn(name)

    def attempt_config(self, config: FoundryConfig) -> CalibrateConfig:
        update = {"max_tokens": config.reports.attempt_max_tokens}
        return config.calibrate.model_copy(update=update)

    def load_for_verify(self, services: Services, tasks: Sequence[Task]) -> Mapping[str, Passages]:
        return passages_of(services, tasks)

    async def verify(
        self, task: Task, passages: Passages, llm: LLMClient, services: Services
    ) -> Checked:
        """The rubric's facts hold up against the passages, the verifier behaves, and the panel
        can write the report with the passages and not without them."""
        try:
            doc_report.check_report(task.verifier.rubric, task.evidence, passages.texts)
        except CheckFailure as failure:
            return Checked("rejected", failure.reason)
        failure = await self_check(task, llm)
        if failure is not None:
            return Checked("rejected", "verifier_self_check", failure)
        decision = await answerability.judge(
            task,
            passages.joined,
            llm,
            services.config.verify,
            answerability.REPORTS,
        )
        return Checked(
            decision.status, decision.reason, decision.detail, decision.verdicts, decision.consensus
        )

    def load_for_variants(
        self, services: Services, tasks: Sequence[Task]
    ) -> Mapping[str, ReportMaterial]:
        passages = passages_of(services, tasks)
        near = neighbours(services, {e.chunk_id for t in tasks for e in t.evidence[:1]})
        return {
            task.task_id: ReportMaterial(
                passages[task.task_id],
                [n for e in task.evidence[:1] for n in near.get(e.chunk_id, [])],
            )
            for task in tasks
        }

    async def variant(
        self,
        task: Task,
        level: Level,
        direction: Direction,
        material: ReportMaterial,
        llm: LLMClient,
        services: Services,
    ) -> Task:
        """`task` at `level`, its passages from the lake and its distractors the chunks nearest
        its first evidence chunk that are not among its own passages."""
        texts = material.passages.texts
        own = [ref.chunk_id for ref in task.source]
        passages = [texts[chunk_id] for chunk_id in own if chunk_id in texts]
        others = [n.chunk.text for n in material.neighbours if n.chunk.chunk_id not in own]
        return doc_report.variant(task, level, direction, passages, others)


FAMILY = DocReport()
