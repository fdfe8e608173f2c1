"""Control items: is each judge able to do the job before its verdicts count?

Made from the run's own chunks, so they are about the material the judges will judge: a
fact sentence with an answer span blanked out becomes
- an answer control: the passage and the fill-in-the-blank question, asked as the open-book
  check asks (the same prompt): the judge must give the blanked span;
- a reject control: the passage, the question and another span of the passage as the answer:
  the judge must say the passage does not support it.
A judge whose accuracy is below `[verify] control_accuracy` is reported before verification
with its figure and the remedy (a stronger model for that judge); `foundry stats` and the
report page show every judge's figure.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from data.answer_match import match
from data.chunking import split_sentences
from data.llm import LLMClient, LLMError
from data.prompts import load_prompt
from data.records import JudgeControl, content_id, utcnow
from data.spans import answer_candidates
from judges.answerability import MAX_ANSWER_TOKENS, OPEN_BOOK

CHECK = load_prompt(__file__, "control_check")
BLANK = "_____"
MIN_SENTENCE_CHARS = 25
MAX_SENTENCE_CHARS = 300
F1_THRESHOLD = 0.6  # as the default answer verifier


@dataclass(frozen=True)
class Control:
    kind: str  # "answer" or "reject"
    passage: str
    question: str
    answer: str  # the span (answer), or the wrong span offered (reject)


def controls_from(chunks: list[str], per_kind: int, seed: str) -> list[Control]:
    """Up to `per_kind` answer and `per_kind` reject controls from `chunks` (texts), one fact
    sentence per chunk, in an order drawn from `seed`."""
    order = list(range(len(chunks)))
    random.Random(seed).shuffle(order)
    answers: list[Control] = []
    rejects: list[Control] = []
    for index in order:
        made = _controls_of(chunks[index])
        if made is None:
            continue
        answer, reject = made
        if len(answers) < per_kind:
            answers.append(answer)
        if reject is not None and len(rejects) < per_kind:
            rejects.append(reject)
        if len(answers) == per_kind and len(rejects) == per_kind:
            break
    return answers + rejects


def _controls_of(passage: str) -> tuple[Control, Control | None] | None:
    """The first usable fact sentence of `passage` as an answer control, and a reject control
    offering another span of the passage (None where it has no other)."""
    spans = answer_candidates(passage)
    for sentence in (s for paragraph in passage.split("\n") for s in split_sentences(paragraph)):
        if not MIN_SENTENCE_CHARS <= len(sentence) <= MAX_SENTENCE_CHARS:
            continue
        options = answer_candidates(sentence)
        if not options or passage.count(sentence) != 1:  # the blank must be unambiguous
            continue
        answer = options[-1]
        question = "Fill in the blank: " + sentence.replace(answer, BLANK, 1)
        others = [
            s for s in spans if answer.lower() not in s.lower() and s.lower() not in answer.lower()
        ]
        reject = Control("reject", passage, question, others[0]) if others else None
        return Control("answer", passage, question, answer), reject
    return None


async def _right(control: Control, role: str, llm: LLMClient) -> bool | None:
    """Whether judge `role` got `control` right (None: it gave no reply)."""
    if control.kind == "answer":
        prompt = OPEN_BOOK.render(passage=control.passage, question=control.question)
    else:
        prompt = CHECK.render(
            passage=control.passage, question=control.question, answer=control.answer
        )
    try:
        reply = await llm.chat(
            role, [{"role": "user", "content": prompt}], max_tokens=MAX_ANSWER_TOKENS
        )
    except LLMError:
        return None
    if control.kind == "answer":
        return match(reply.text, control.answer, F1_THRESHOLD, question=control.question)[0] >= 1.0
    return reply.text.strip().lower().startswith("no")


async def measure(controls: list[Control], llm: LLMClient, threshold: float) -> list[JudgeControl]:
    """Each judge's accuracy on `controls` (a control it gave no reply to counts as wrong)."""
    roles = llm.judge_roles
    outcomes = await asyncio.gather(*(_right(c, role, llm) for role in roles for c in controls))
    records = []
    for position, role in enumerate(roles):
        mine = outcomes[position * len(controls) : (position + 1) * len(controls)]
        by_kind: dict[str, list[int]] = {}
        for control, right in zip(controls, mine, strict=True):
            tally = by_kind.setdefault(control.kind, [0, 0])
            tally[0] += 1
            tally[1] += bool(right)
        correct = sum(bool(right) for right in mine)
        accuracy = correct / len(controls) if controls else 0.0
        model = llm.model(role)
        records.append(
            JudgeControl(
                control_id=content_id(role, model, CHECK.version, OPEN_BOOK.version, len(controls)),
                role=role,
                model=model,
                items=len(controls),
                correct=correct,
                unanswered=sum(right is None for right in mine),
                accuracy=accuracy,
                threshold=threshold,
                competent=accuracy >= threshold,
                by_kind=by_kind,
                recorded_at=utcnow(),
            )
        )
    return records


def figure(record: JudgeControl) -> str:
    """A judge's control figure, as said before verification."""
    return (
        f"judge {record.role} ({record.model}) got {record.correct} of {record.items} control"
        f" items right ({record.accuracy:.0%})"
    )


def warning(record: JudgeControl) -> str:
    """What to tell the user about a judge below the threshold, with the remedy."""
    return (
        f"{figure(record)[:-1]}, below {record.threshold:.0%}): its verdicts are unreliable, so"
        " tasks may be rejected for want of a judge able to answer; give that judge a stronger"
        " model ([[roles.judges]] model and base_url in foundry.toml)"
    )
