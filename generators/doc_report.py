"""Document reports, built backwards: fix the facts and their evidence first, then write the
request for a report that must state them.

From one document, a window of `reports.passages` neighbouring passages (chunks in source
order) is drawn by a seeded RNG among those where every passage has fact sentences
(`generators.doc_qa.focus_sentences`). For each passage, the generator model picks up to
`reports.facts_per_passage` of those sentences (the schema's `enum` makes any other quote
invalid) and states each as a short checkable fact; deterministic checks keep a fact only when
its quote is verbatim in its passage and the fact keeps one of the quote's names, numbers or
dates. The facts must come from at least two passages. Then the model writes the report request
(it names the subject and states no number or date of the facts).

The task carries its rubric in its verifier: a `rubric` spec judged item by item (`by_item`),
one item per fact, with `evidence[i]` the quote (and chunk) of `rubric[i]` and `source` the
passages with their locations. The gold is a reference report, the facts in order; the spec's
`negatives` hold that report without the last passage's facts, which the verifier must reject.
The passages are in the solver's prompt (the `open_book` environment): a report draws on
several passages, which a search within a few turns rarely finds all of.

Difficulty ladder (`LADDER`), no model asked: `outlined` appends to the request how many facts
the report must state from which passage; `passages` (base) gives the passages alone;
`distractors` shuffles them among up to DISTRACTORS chunks nearest the first passage by
embedding (from anywhere in the corpus), which the report must tell apart.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from data.config import ReportsConfig
from data.documents import MONTHS, answer_candidates
from data.lake import (
    Chunk,
    Direction,
    Evidence,
    Lineage,
    Message,
    RubricSpec,
    SourceRef,
    Task,
    seed_for,
)
from data.llm import LLMClient
from data.prompts import load_prompt
from generators.candidates import Candidate, Rejection
from generators.checks import CheckFailure, contains
from generators.doc_qa import PASSAGE_PROMPT, focus_sentences
from generators.knobs import Ladder, Level, repaired

KIND = "doc_report"
GENERATOR = "doc_report"
VERSION = "1"
FACTS_PROMPT = load_prompt(__file__, "doc_report_facts")
REQUEST_PROMPT = load_prompt(__file__, "doc_report_request")
SYSTEM_PROMPT = load_prompt(__file__, "doc_report_system")
MIN_PASSAGES = 2
DISTRACTORS = 3
HINT_MARK = "\n\nTo cover: "  # between the request and the outline appended to it
_FIGURE = re.compile(rf"^(?:\d|(?:{MONTHS}) \d)")

LADDER = Ladder(
    levels=(
        Level("outlined", {"context": "passages", "hint": "outline"}),
        Level("passages", {"context": "passages", "hint": "none"}),
        Level("distractors", {"context": "distractors", "hint": "none"}),
    ),
    base="passages",
)


@dataclass(frozen=True)
class Document:
    """A document's chunks in source order, with its path and title."""

    source_id: str
    path: str
    title: str
    chunks: list[Chunk]


@dataclass(frozen=True)
class Fact:
    """A checkable fact of a report's rubric and the passage sentence it is quoted from."""

    chunk: Chunk
    quote: str
    statement: str


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")
    request: str = Field(min_length=1, max_length=600)


def figures(text: str) -> list[str]:
    """The numbers and month-and-year dates of `text` (its answer spans that are figures)."""
    return [span for span in answer_candidates(text) if _FIGURE.match(span)]


def check_fact(chunk_text: str, quote: str, statement: str) -> None:
    """The quote is verbatim in its passage and the statement keeps one of its names, numbers
    or dates (so an answer can be checked against it)."""
    if not quote.strip() or not statement.strip():
        raise CheckFailure("empty")
    if not contains(chunk_text, quote):
        raise CheckFailure("evidence_not_in_chunk")
    if not any(contains(statement, span) for span in answer_candidates(quote)):
        raise CheckFailure("fact_not_in_quote")


def check_report(
    rubric: Sequence[str], evidence: Sequence[Evidence], texts: dict[str, str]
) -> None:
    """A report task's rubric holds up: a fact per evidence quote (items after them are added
    requirements, e.g. by a remedy), each quote verbatim in its passage (`texts`: chunk id ->
    text), and the quotes from at least two passages. Raises `CheckFailure`."""
    if not evidence or len(rubric) < len(evidence):
        raise CheckFailure("rubric_without_evidence")
    for item, quote in zip(rubric, evidence, strict=False):
        if quote.chunk_id not in texts:
            raise CheckFailure("source_missing")
        check_fact(texts[quote.chunk_id], quote.quote, item)
    if len({quote.chunk_id for quote in evidence}) < MIN_PASSAGES:
        raise CheckFailure("single_passage")


def check_request(request: str, facts: Sequence[Fact], max_chars: int) -> None:
    """The request is not too long and states none of the facts, nor any of their figures."""
    if not request.strip():
        raise CheckFailure("empty")
    if len(request) > max_chars:
        raise CheckFailure("request_too_long")
    for fact in facts:
        if contains(request, fact.statement) or contains(request, fact.quote):
            raise CheckFailure("request_states_fact")
        if any(contains(request, figure) for figure in figures(fact.statement)):
            raise CheckFailure("request_gives_fact")


def task_prompt(request: str, passages: Sequence[str]) -> list[Message]:
    """The solver's prompt: the instructions and the numbered passages, then the request."""
    blocks = [SYSTEM_PROMPT.template.strip()]
    for number, text in enumerate(passages, start=1):
        blocks.append(PASSAGE_PROMPT.render(label=f" {number}", text=text.strip()).strip())
    return [
        Message(role="system", content="\n\n".join(blocks)),
        Message(role="user", content=request),
    ]


def reference_report(facts: Sequence[str]) -> str:
    """The gold report: the facts in order, one sentence each."""
    return " ".join(f if f.rstrip().endswith((".", "!", "?")) else f"{f}." for f in facts)


def window(document: Document, size: int) -> list[Chunk] | None:
    """`size` neighbouring chunks of `document` that all have fact sentences, drawn by a seed
    of the document (None when there are none)."""
    usable = [bool(focus_sentences(chunk.text)) for chunk in document.chunks]
    starts = [i for i in range(len(usable) - size + 1) if all(usable[i : i + size])]
    if not starts:
        return None
    seed_text, _ = seed_for(GENERATOR, VERSION, document.source_id)
    start = random.Random(seed_text).choice(starts)
    return document.chunks[start : start + size]


async def generate(
    document: Document, llm: LLMClient, config: ReportsConfig, temperature: float
) -> list[Candidate | Rejection]:
    """One candidate report task from `document`, or why none was made (the generator model
    samples at `temperature`)."""
    passages = window(document, config.passages)
    if passages is None:
        detail = f"{len(document.chunks)} chunks; {config.passages} neighbours with facts needed"
        return [Rejection("-", "no_usable_passages", detail)]
    name = "+".join(str(chunk.index) for chunk in passages)
    seed_text, seed = seed_for(GENERATOR, VERSION, document.source_id, name)
    facts: list[Fact] = []
    dropped: list[str] = []
    for chunk in passages:
        for fact in await _facts(chunk, llm, config, temperature, seed):
            try:
                check_fact(chunk.text, fact.quote, fact.statement)
            except CheckFailure as failure:
                dropped.append(f"{failure.reason}: {fact.statement!r}")
                continue
            if all(fact.statement != kept.statement for kept in facts):
                facts.append(fact)
    if len({fact.chunk.chunk_id for fact in facts}) < MIN_PASSAGES:
        detail = f"{len(facts)} facts kept; dropped: {'; '.join(dropped)}"
        return [Rejection(name, "facts_from_one_passage", detail)]
    request = await _request(document.title, facts, llm, temperature, seed)
    try:
        check_request(request, facts, config.max_request_chars)
    except CheckFailure as failure:
        return [Rejection(name, failure.reason, f"request={request!r}")]
    return [Candidate(name, _task(document, passages, facts, request, llm, seed_text))]


async def _facts(
    chunk: Chunk, llm: LLMClient, config: ReportsConfig, temperature: float, seed: int
) -> list[Fact]:
    """The generator's facts of `chunk`, each quoting one of its fact sentences (on one line:
    the quote checks compare text with its whitespace collapsed)."""
    options = list(dict.fromkeys(" ".join(s.split()) for s in focus_sentences(chunk.text)))
    entry = create_model(
        "FactEntry",
        __config__=ConfigDict(extra="ignore"),
        quote=(Literal[tuple(options)], ...),
        fact=(str, Field(min_length=1, max_length=300)),
    )
    count = min(config.facts_per_passage, len(options))
    reply_schema = create_model(
        "Facts",
        __config__=ConfigDict(extra="ignore"),
        facts=(list[entry], Field(min_length=1, max_length=count)),
    )
    prompt = FACTS_PROMPT.render(
        passage=chunk.text, options="\n".join(f"- {o}" for o in options), count=str(count)
    )
    reply = await llm.structured(
        "generator",
        [{"role": "user", "content": prompt}],
        reply_schema,
        temperature=temperature,
        max_tokens=100 * count,
        seed=seed,
    )
    return [Fact(chunk, e.quote, " ".join(e.fact.split())) for e in reply.facts]


async def _request(
    title: str, facts: Sequence[Fact], llm: LLMClient, temperature: float, seed: int
) -> str:
    prompt = REQUEST_PROMPT.render(
        title=title or "(untitled)", facts="\n".join(f"- {f.statement}" for f in facts)
    )
    written = await llm.structured(
        "generator",
        [{"role": "user", "content": prompt}],
        _Request,
        temperature=temperature,
        max_tokens=160,
        seed=seed,
    )
    return written.request.strip()


def _task(
    document: Document,
    passages: Sequence[Chunk],
    facts: Sequence[Fact],
    request: str,
    llm: LLMClient,
    seed_text: str,
) -> Task:
    prompt = task_prompt(request, [chunk.text for chunk in passages])
    statements = [fact.statement for fact in facts]
    last = passages[-1].chunk_id
    partial = [fact.statement for fact in facts if fact.chunk.chunk_id != last]
    verifier = RubricSpec(rubric=statements, by_item=True, negatives=[reference_report(partial)])
    answer = reference_report(statements)
    return Task(
        task_id=Task.make_id(KIND, prompt, answer, verifier),
        kind=KIND,
        prompt=prompt,
        answer=answer,
        verifier=verifier,
        evidence=[Evidence(chunk_id=fact.chunk.chunk_id, quote=fact.quote) for fact in facts],
        source=[
            SourceRef(
                source_id=document.source_id,
                path=document.path,
                chunk_id=chunk.chunk_id,
                location=chunk.location,
            )
            for chunk in passages
        ],
        lineage=Lineage(
            generator=GENERATOR,
            generator_version=VERSION,
            prompt_hash=f"{FACTS_PROMPT.version}+{REQUEST_PROMPT.version}",
            model=llm.model("generator"),
            seed=seed_text,
            knobs={
                "passages": len(passages),
                "facts": len(facts),
                "level": LADDER.base,
                **LADDER.level(LADDER.base).knobs,
            },
        ),
    )


def bare_request(task: Task) -> str:
    """The task's request without the outline a variant may have appended."""
    return task.question.split(HINT_MARK, 1)[0]


def outline(task: Task) -> str:
    """How many facts the report must state from which of its passages (numbered as the
    prompt shows them at the levels without distractors)."""
    numbers = {ref.chunk_id: n for n, ref in enumerate(task.source, start=1)}
    counts = [sum(e.chunk_id == chunk_id for e in task.evidence) for chunk_id in numbers]
    parts = [f"{count} from passage {numbers[c]}" for c, count in zip(numbers, counts, strict=True)]
    facts = len(task.evidence)
    return f"{facts} fact{'s' if facts > 1 else ''}: {', '.join(p for p in parts if p[0] != '0')}."


def variant(
    task: Task,
    level: Level,
    direction: Direction,
    passages: Sequence[str],
    distractors: Sequence[str],
) -> Task:
    """`task` at `level`: the same rubric and reference, its request with or without the
    outline, and its `passages` (the texts of its sources, in order) alone or shuffled among
    `distractors` (other chunks, nearest first). Raises `CheckFailure` where it cannot be."""
    if len(passages) != len(task.source):
        raise CheckFailure("source_missing")
    seed_text, seed = seed_for(GENERATOR, VERSION, task.task_id, level.name)
    request = bare_request(task)
    if level.knobs["hint"] == "outline":
        request += HINT_MARK + outline(task)
    shown = list(passages)
    if level.knobs["context"] == "distractors":
        if not distractors:
            raise CheckFailure("no_neighbours")
        shown += distractors[:DISTRACTORS]
        random.Random(seed).shuffle(shown)
    prompt = task_prompt(request, shown)
    written = task.lineage.model_copy(update={"seed": seed_text})
    lineage = repaired(written, dict(task.lineage.knobs), task, level, direction, LADDER.base)
    return task.model_copy(
        update={
            "task_id": Task.make_id(task.kind, prompt, task.answer, task.verifier),
            "prompt": prompt,
            "lineage": lineage,
        }
    )
