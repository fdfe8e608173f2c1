"""Document QA variants for the repair loop: the same answer and evidence, asked easier or harder.

Each level of `doc_qa.LADDER` is made from the task's question (without any hint) and its first
evidence quote:
- the context levels put the evidence sentence (`evidence`, `evidence_hinted`), its passage
  (`passage`) or the passage among its nearest neighbours in a seeded order (`distractors`)
  in the prompt; the search levels put nothing there;
- `pointed` / `hinted` append a hint: the source document's title, and for `hinted` also the
  answer's shape (a four-digit number's decade, a number's length and first digit, a name's
  word count and first letter); `evidence_hinted` appends the shape alone; a hint that states
  the answer is refused;
- `paraphrased`: the generator model rewords the question; kept only if its lexical overlap with
  the evidence drops by at least MIN_OVERLAP_DROP;
- `two_hop`: a bridge entity of the evidence that a neighbouring chunk (by embedding) also names
  in a fact without the answer; the model writes a question that describes the bridge by that
  second fact instead of naming it (neither whole nor by a capitalised word of it), and both
  facts become the evidence. Nothing checks that the first fact alone cannot answer it: with
  the passage in hand a reader may guess the link, so `hops=2` says how the question was
  written, and matters most to a solver that has to search the corpus.

A level that cannot be made raises `CheckFailure` with a stable reason, so the repair loop can
try the next level and record why this one failed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from data.config import GenerateConfig
from data.documents import MONTHS, answer_candidates
from data.lake import Chunk, Direction, Evidence, SourceRef, Task, seed_for
from data.llm import LLMClient, LLMError
from data.prompts import load_prompt
from generators.checks import (
    CheckFailure,
    check_hint,
    check_question,
    contains,
    lexical_overlap,
    loose,
)
from generators.doc_qa import (
    GENERATOR,
    LADDER,
    SEARCH,
    VERSION,
    cloze,
    draft_question,
    focus_sentences,
    task_prompt,
)
from generators.knobs import Level, repaired

PARAPHRASE_PROMPT = load_prompt(__file__, "doc_qa_paraphrase")
TWO_HOP_PROMPT = load_prompt(__file__, "doc_qa_two_hop")
HINT_MARK = "\n\nHint: "
MIN_OVERLAP_DROP = 0.1
DISTRACTORS = 2  # neighbouring passages beside the task's own at the `distractors` level
# Knobs that describe one derivation step (a rewrite's measurements): a variant records its own
# and leaves its parent's to the parent's lineage.
STEP_KNOBS = ("overlap_pct", "parent_overlap_pct", "bridge")


@dataclass(frozen=True)
class Neighbour:
    chunk: Chunk
    source_path: str


@dataclass(frozen=True)
class Material:
    """What variants draw on besides the task: its source document's title, the text of its
    evidence chunk, and the chunks nearest that chunk by embedding, nearest first (the document
    family loads it: `families.documents.materials`)."""

    title: str
    passage: str
    neighbours: list[Neighbour]


@dataclass(frozen=True)
class Bridge:
    entity: str  # named by the evidence and by `fact`
    fact: str  # a sentence of the neighbour's chunk
    neighbour: Neighbour


def bare_question(task: Task) -> str:
    """The task's question without the hint a variant may have appended."""
    return task.question.split(HINT_MARK, 1)[0]


def answered_by_source(task: Task, passage: str) -> bool:
    """Whether `passage` answers `task` by construction: its question (hint aside) is the
    fill-in-the-blank of an evidence sentence `passage` holds verbatim, the blank being the
    answer."""
    question = loose(bare_question(task))
    return any(
        contains(passage, e.quote) and question == loose(cloze(e.quote, task.answer))
        for e in task.evidence
    )


def answer_shape(answer: str) -> str:
    """A hint at the answer's form that narrows it down without giving it away."""
    if re.fullmatch(rf"(?:{MONTHS}) \d{{4}}", answer):
        return "is a month and a year"
    if re.fullmatch(r"\d{4}", answer):
        decade = int(answer[:3]) * 10
        return f"is a number from {decade} to {decade + 9}"
    if re.fullmatch(r"\d[\d,]*", answer):
        digits = sum(c.isdigit() for c in answer)
        if digits == 1:
            return "is a number below ten"
        return f"is a {digits}-digit number that starts with {answer[0]}"
    if re.fullmatch(r"\d[\d,]*\.\d+", answer):
        return "is a number with a decimal point"
    words = len(answer.split())
    return f'has {words} word{"s" if words > 1 else ""} and starts with "{answer[0]}"'


def hint_text(kind: str, title: str, answer: str) -> str:
    """The hint a level appends ("" for none); it must not state the answer."""
    if kind == "none":
        return ""
    if kind == "shape":
        hint = f"The answer {answer_shape(answer)}."
        check_hint(hint, answer)
        return hint
    if not title.strip():
        raise CheckFailure("no_source_title")
    parts = [f'The fact is from the document "{title}".']
    if kind == "source+shape":
        parts.append(f"The answer {answer_shape(answer)}.")
    hint = " ".join(parts)
    check_hint(hint, answer)
    return hint


def names_bridge(question: str, bridge: str) -> bool:
    """The question names the bridge entity, whole or by one of its capitalised words ("the
    Kelm" for "River Kelm"); a lower-case description ("the river that ...") is fine."""
    words = [w for w in bridge.split() if len(w) > 2 and w[0].isupper()]
    return contains(question, bridge) or any(
        re.search(rf"(?<!\w){re.escape(w)}(?!\w)", question) for w in words
    )


def find_bridge(evidence: str, answer: str, neighbours: list[Neighbour]) -> Bridge | None:
    """The first name in `evidence` (other than the answer) that a fact sentence of a
    neighbour also names, where that fact does not contain the answer."""
    names = [
        span
        for span in answer_candidates(evidence)
        if not re.search(r"\d", span) and not contains(span, answer) and not contains(answer, span)
    ]
    for neighbour in neighbours:
        for sentence in focus_sentences(neighbour.chunk.text):
            if contains(sentence, answer) or contains(evidence, sentence):
                continue
            for name in names:
                if contains(sentence, name):
                    return Bridge(name, sentence, neighbour)
    return None


@dataclass(frozen=True)
class Rewrite:
    """A level's new question, the prompt that wrote it, and what it records in the lineage."""

    question: str
    prompt_version: str
    knobs: dict[str, int | str]
    bridge: Bridge | None = None


async def make_variant(
    task: Task,
    level: Level,
    direction: Direction,
    material: Material,
    llm: LLMClient,
    config: GenerateConfig,
) -> Task:
    """`task` asked at `level`: a new task whose lineage names its parent and the path taken."""
    if not task.evidence or not task.source:
        raise CheckFailure("no_evidence")
    seed_text, seed = seed_for(GENERATOR, VERSION, task.task_id, level.name)
    try:
        rewrite = await _rewrite(task, level, material, llm, config, seed)
    except LLMError as error:
        if error.reason != "invalid_structured_output":
            raise
        raise CheckFailure("invalid_structured_output") from error
    question = rewrite.question if rewrite else bare_question(task)
    check_question(question, task.answer, config.max_question_chars)
    hint = hint_text(str(level.knobs["hint"]), material.title, task.answer)
    text = question + (HINT_MARK + hint if hint else "")

    prompt = task_prompt(text, _passages(task, level, material, seed))
    # a new question has no cloze context to strip from replies
    verifier = task.verifier.model_copy(update={"context": []}) if rewrite else task.verifier
    evidence, sources = list(task.evidence), list(task.source)
    if rewrite and rewrite.bridge:
        chunk, path = rewrite.bridge.neighbour.chunk, rewrite.bridge.neighbour.source_path
        evidence.append(Evidence(chunk_id=chunk.chunk_id, quote=rewrite.bridge.fact))
        sources.append(
            SourceRef(
                source_id=chunk.source_id,
                path=path,
                chunk_id=chunk.chunk_id,
                location=chunk.location,
            )
        )
    knobs = {k: v for k, v in task.lineage.knobs.items() if k not in STEP_KNOBS}
    written = task.lineage.model_copy(
        update={
            "prompt_hash": task.lineage.prompt_hash
            + (f"+{rewrite.prompt_version}" if rewrite else ""),
            "model": llm.model("generator") if rewrite else task.lineage.model,
            "seed": seed_text,
        }
    )
    knobs.update(rewrite.knobs if rewrite else {})
    lineage = repaired(written, knobs, task, level, direction, LADDER.base)
    return task.model_copy(
        update={
            "task_id": Task.make_id(task.kind, prompt, task.answer, verifier),
            "prompt": prompt,
            "verifier": verifier,
            "evidence": evidence,
            "source": sources,
            "lineage": lineage,
        }
    )


async def at_level(
    task: Task, level: Level, material: Material, llm: LLMClient, config: GenerateConfig
) -> Task:
    """A new task (not yet in the lake) made at `level` rather than where it was generated:
    the variant, with no repair step in its lineage (it has no parent to point to)."""
    names = [each.name for each in LADDER.levels]
    made_at = names.index(str(task.lineage.knobs.get("level", LADDER.base)))
    if names.index(level.name) == made_at:
        return task
    direction: Direction = "harder" if names.index(level.name) > made_at else "easier"
    variant = await make_variant(task, level, direction, material, llm, config)
    unrepaired = variant.lineage.model_copy(update={"repair": None})
    return variant.model_copy(update={"lineage": unrepaired})


def _passages(task: Task, level: Level, material: Material, seed: int) -> list[str]:
    """The passages the level's prompt gives the solver (none at the search levels)."""
    context = level.knobs["context"]
    if context == SEARCH:
        return []
    if context == "evidence":
        return [task.evidence[0].quote]
    if not material.passage:
        raise CheckFailure("no_passage")
    if context == "passage":
        return [material.passage]
    others = [n.chunk.text for n in material.neighbours[:DISTRACTORS]]
    if not others:
        raise CheckFailure("no_neighbours")
    passages = [material.passage, *others]
    random.Random(seed).shuffle(passages)
    return passages


async def _rewrite(
    task: Task, level: Level, material: Material, llm: LLMClient, config: GenerateConfig, seed: int
) -> Rewrite | None:
    """The level's new question, or None where the level only adds a hint."""
    evidence = task.evidence[0].quote
    if level.knobs["hops"] == 2:
        bridge = find_bridge(evidence, task.answer, material.neighbours)
        if bridge is None:
            raise CheckFailure("no_bridge_in_neighbours")
        prompt = TWO_HOP_PROMPT.render(
            evidence=evidence, bridge_fact=bridge.fact, answer=task.answer, bridge=bridge.entity
        )
        question = await _draft(prompt, bare_question(task), task.answer, llm, config, seed)
        if names_bridge(question, bridge.entity):
            raise CheckFailure("question_names_bridge")
        knobs = {"bridge": bridge.entity, "question_style": "question"}
        return Rewrite(question, TWO_HOP_PROMPT.version, knobs, bridge)
    if level.knobs["overlap"] == "paraphrase":
        original = bare_question(task)
        prompt = PARAPHRASE_PROMPT.render(evidence=evidence, question=original, answer=task.answer)
        question = await _draft(prompt, original, task.answer, llm, config, seed)
        before = lexical_overlap(original, evidence, task.answer)
        after = lexical_overlap(question, evidence, task.answer)
        if after > before - MIN_OVERLAP_DROP:
            raise CheckFailure("overlap_not_lower")
        knobs = {
            "overlap_pct": round(100 * after),
            "parent_overlap_pct": round(100 * before),
            "question_style": "question",
        }
        return Rewrite(question, PARAPHRASE_PROMPT.version, knobs)
    return None


async def _draft(
    prompt: str, original: str, answer: str, llm: LLMClient, config: GenerateConfig, seed: int
) -> str:
    question = await draft_question(prompt, llm, config, seed)
    check_question(question, answer, config.max_question_chars)
    if question == original:
        raise CheckFailure("question_unchanged")
    return question
