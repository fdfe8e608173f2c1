"""Document QA, built backwards: fix the evidence and the answer first, then write the question.

For each of a few focus sentences drawn by a seeded RNG from the chunk (the evidence, quoted
from the chunk by construction):
1. the generator model picks the answer among the sentence's most specific candidate spans
   (dates, numbers, then names: `data.documents.spans.ranked_candidates`, best first; the schema's
   `enum` makes any other reply invalid);
2. the question is written: by the model (`question`), as a fill-in-the-blank of the evidence
   (`cloze`), or by the model with the cloze as fallback when its question fails the checks
   (`auto`); the style used is a recorded difficulty knob (a cloze overlaps the source more);
3. deterministic checks (see `generators.checks`) reject anything that does not hold together.

What the solver is given besides the question is the level's `context` knob, and it decides the
environment an attempt runs in: at the levels with context in the prompt (the evidence sentence,
its passage, the passage among its nearest neighbours) the solver reads it (`open_book`); at the
`search` levels the source is withheld and must be rediscovered with search tools over the corpus
(`doc_search`). A candidate starts at `generate.level`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from data.config import GenerateConfig
from data.documents import answer_candidates, ranked_candidates, split_sentences
from data.lake import (
    VERIFIER_SPEC,
    Chunk,
    Evidence,
    Lineage,
    Message,
    SourceRef,
    Task,
    seed_for,
)
from data.llm import LLMClient, LLMError
from data.prompts import load_prompt
from generators.candidates import Candidate, Rejection
from generators.checks import BLANK, CheckFailure, check_answer, check_question, contains
from generators.knobs import Ladder, Level

GENERATOR = "doc_qa"
VERSION = "2"
ANSWER_PROMPT = load_prompt(__file__, "doc_qa_answer")
QUESTION_PROMPT = load_prompt(__file__, "doc_qa_question")
SYSTEM_PROMPT = load_prompt(__file__, "doc_qa_system")
PASSAGE_PROMPT = load_prompt(__file__, "doc_qa_passage")
MIN_SENTENCE_CHARS = 25
MAX_SENTENCE_CHARS = 300
MAX_ANSWER_OPTIONS = 4  # the most specific spans of the sentence the generator chooses among

# Difficulty knobs, easiest level first (variants are made by `generators.doc_qa_variants`).
# `context` is what the prompt gives the solver: the evidence sentence, its passage, the passage
# among its nearest neighbours by embedding, or nothing (`search`: the passage must be found).
# `hint` appends the answer's shape and/or the source document's title; `overlap: paraphrase`
# rewords the question to share fewer words with the evidence; `hops: 2` needs a second fact.
SEARCH = "search"


def _level(
    name: str, context: str, hint: str = "none", overlap: str = "source", hops: int = 1
) -> Level:
    return Level(name, {"context": context, "hint": hint, "overlap": overlap, "hops": hops})


LADDER = Ladder(
    levels=(
        _level("evidence_hinted", "evidence", hint="shape"),
        _level("evidence", "evidence"),
        _level("passage", "passage"),
        _level("distractors", "distractors"),
        _level("hinted", SEARCH, hint="source+shape"),
        _level("pointed", SEARCH, hint="source"),
        _level("base", SEARCH),
        _level("paraphrased", SEARCH, overlap="paraphrase"),
        _level("two_hop", SEARCH, overlap="paraphrase", hops=2),
    ),
    base="base",
)


def level_of(task: Task) -> str:
    """The ladder level `task` was made at."""
    return str(task.lineage.knobs.get("level", LADDER.base))


def context_of(task: Task) -> str:
    """What `task`'s prompt gives the solver besides the question (`search`: nothing)."""
    return str(task.lineage.knobs.get("context", SEARCH))


def task_prompt(question: str, passages: Sequence[str]) -> list[Message]:
    """The solver's prompt: the instructions followed by the passages to read (none at the
    search levels), then the question alone as the user turn."""
    blocks = [SYSTEM_PROMPT.template.strip()]
    for number, text in enumerate(passages, start=1):
        label = f" {number}" if len(passages) > 1 else ""
        blocks.append(PASSAGE_PROMPT.render(label=label, text=text.strip()).strip())
    return [
        Message(role="system", content="\n\n".join(blocks)),
        Message(role="user", content=question),
    ]


class QuestionDraft(BaseModel):
    model_config = ConfigDict(extra="ignore")
    question: str = Field(min_length=1, max_length=300)


def focus_sentences(text: str, generic: frozenset[str] = frozenset()) -> list[str]:
    """Sentences fit to carry a fact: neither fragments nor run-ons, not an introduction to
    what follows (ending in a colon: the code or list it introduces is not in the sentence),
    with an answer span that is not one of the corpus's `generic` words."""
    return [
        s
        for s in split_sentences(text)
        if MIN_SENTENCE_CHARS <= len(s) <= MAX_SENTENCE_CHARS
        and not s.endswith(":")
        and answer_candidates(s, generic)
    ]


def cloze(evidence: str, answer: str) -> str:
    blanked = re.sub(rf"(?<!\w){re.escape(answer)}(?!\w)", BLANK, evidence, count=1)
    return "Fill in the blank: " + blanked


async def generate(
    chunk: Chunk,
    source_path: str,
    llm: LLMClient,
    config: GenerateConfig,
    generic: frozenset[str] = frozenset(),
) -> list[Candidate | Rejection]:
    """Up to `candidates_per_chunk` candidate tasks from `chunk`, each a task or a rejection;
    no answer is one of the corpus's `generic` words (`data.documents.spans.generic_words`)."""
    seed_text, _ = seed_for(GENERATOR, VERSION, chunk.chunk_id)
    sentences = focus_sentences(chunk.text, generic)
    if not sentences:
        return [Rejection("-", "no_usable_sentence", f"{len(chunk.text)} chars, no fact sentence")]
    count = min(config.candidates_per_chunk, len(sentences))
    picks = sorted(random.Random(seed_text).sample(range(len(sentences)), count))
    return [
        await _candidate(chunk, source_path, sentences[i], i, llm, config, generic) for i in picks
    ]


def sibling_sentence(
    chunk: Chunk,
    task: Task,
    asked: set[str],
    config: GenerateConfig,
    generic: frozenset[str] = frozenset(),
) -> tuple[int, str]:
    """A fact sentence of `chunk` that no task asks about yet: neither one `generate` picks,
    nor one of `asked` (the evidence of the tasks made from it so far), nor one holding
    `task`'s answer; drawn by a seed of the chunk and `task` (raises `CheckFailure`
    `no_unasked_sentence` when every sentence is taken)."""
    seed_text, _ = seed_for(GENERATOR, VERSION, chunk.chunk_id)
    sentences = focus_sentences(chunk.text, generic)
    count = min(config.candidates_per_chunk, len(sentences))
    picked = set(random.Random(seed_text).sample(range(len(sentences)), count))
    free = [
        i
        for i, sentence in enumerate(sentences)
        if i not in picked and sentence not in asked and not contains(sentence, task.answer)
    ]
    if not free:
        raise CheckFailure("no_unasked_sentence")
    sibling_seed, _ = seed_for(GENERATOR, VERSION, chunk.chunk_id, "sibling", task.task_id)
    pick = random.Random(sibling_seed).choice(free)
    return pick, sentences[pick]


async def sibling(
    task: Task,
    chunk: Chunk,
    source_path: str,
    asked: set[str],
    llm: LLMClient,
    config: GenerateConfig,
    generic: frozenset[str] = frozenset(),
) -> Task:
    """A new task at the generator's base level from the chunk `task` draws on, about a fact
    sentence no task of that chunk asks about (`asked`: the evidence sentences of those there
    are); raises `CheckFailure` where none can be made."""
    focus, sentence = sibling_sentence(chunk, task, asked, config, generic)
    made = await _candidate(chunk, source_path, sentence, focus, llm, config, generic)
    if isinstance(made, Rejection):
        raise CheckFailure(made.reason)
    return made.task


async def _candidate(
    chunk: Chunk,
    source_path: str,
    evidence: str,
    focus: int,
    llm: LLMClient,
    config: GenerateConfig,
    generic: frozenset[str],
) -> Candidate | Rejection:
    name = f"focus={focus}"
    seed_text, seed = seed_for(GENERATOR, VERSION, chunk.chunk_id, str(focus))
    answer = await _choose_answer(chunk.text, evidence, llm, config, seed, generic)
    try:
        check_answer(chunk.text, evidence, answer, config.max_answer_words)
    except CheckFailure as failure:
        return Rejection(name, failure.reason, f"evidence={evidence!r} answer={answer!r}")

    question, style = await _write_question(evidence, answer, llm, config, seed)
    try:
        check_question(question, answer, config.max_question_chars)
    except CheckFailure as failure:
        return Rejection(name, failure.reason, f"question={question!r} answer={answer!r}")

    level = LADDER.level(config.level)
    context = {"evidence": [evidence], "passage": [chunk.text], SEARCH: []}
    prompt = task_prompt(question, context[str(level.knobs["context"])])
    blanked = _blank_context(question) if style == "cloze" else []
    verifier = VERIFIER_SPEC.validate_python({"type": config.verifier, "context": blanked})
    task = Task(
        task_id=Task.make_id("doc_qa", prompt, answer, verifier),
        kind="doc_qa",
        prompt=prompt,
        answer=answer,
        verifier=verifier,
        evidence=[Evidence(chunk_id=chunk.chunk_id, quote=evidence)],
        source=[
            SourceRef(
                source_id=chunk.source_id,
                path=source_path,
                chunk_id=chunk.chunk_id,
                location=chunk.location,
            )
        ],
        lineage=Lineage(
            generator=GENERATOR,
            generator_version=VERSION,
            prompt_hash=f"{ANSWER_PROMPT.version}+{QUESTION_PROMPT.version}",
            model=llm.model("generator"),
            seed=seed_text,
            knobs={
                "focus_sentence": focus,
                "question_style": style,
                "level": level.name,
                **level.knobs,
            },
        ),
    )
    return Candidate(name, task)


async def _choose_answer(
    passage: str,
    evidence: str,
    llm: LLMClient,
    config: GenerateConfig,
    seed: int,
    generic: frozenset[str],
) -> str:
    options = ranked_candidates(evidence, generic)[:MAX_ANSWER_OPTIONS]
    if len(options) == 1:
        return options[0]
    choice = create_model(
        "AnswerChoice",
        __config__=ConfigDict(extra="ignore"),
        answer=(Literal[tuple(options)], ...),
    )
    prompt = ANSWER_PROMPT.render(
        passage=passage, focus=evidence, options="\n".join(f"- {o}" for o in options)
    )
    reply = await llm.structured(
        "generator",
        [{"role": "user", "content": prompt}],
        choice,
        temperature=config.temperature,
        max_tokens=60,
        seed=seed,
    )
    return reply.answer


async def draft_question(
    prompt: str, llm: LLMClient, config: GenerateConfig, seed: int, repairs: int = 2
) -> str:
    """The generator's question for `prompt` (a `{"question": ...}` reply), stripped."""
    written = await llm.structured(
        "generator",
        [{"role": "user", "content": prompt}],
        QuestionDraft,
        max_tokens=120,
        temperature=config.temperature,
        seed=seed,
        repairs=repairs,
    )
    return written.question.strip()


async def _write_question(
    evidence: str, answer: str, llm: LLMClient, config: GenerateConfig, seed: int
) -> tuple[str, Literal["question", "cloze"]]:
    if config.question_style == "cloze":
        return cloze(evidence, answer), "cloze"
    auto = config.question_style == "auto"
    prompt = QUESTION_PROMPT.render(evidence=evidence, answer=answer)
    try:
        # in auto mode one repair (a reply cut off in transit is whole the second time), then
        # the cloze
        question = await draft_question(prompt, llm, config, seed, repairs=1 if auto else 2)
        if auto:
            check_question(question, answer, config.max_question_chars)
    except LLMError as error:
        if not auto or error.reason != "invalid_structured_output":
            raise
        return cloze(evidence, answer), "cloze"
    except CheckFailure:
        return cloze(evidence, answer), "cloze"
    return question, "question"


def _blank_context(question: str) -> list[str]:
    """The text before and after the blank: a reply that repeats it is cut to the filler."""
    body = question.removeprefix("Fill in the blank: ")
    before, after = body.split(BLANK, 1)
    return [before.strip(), after.strip()]
