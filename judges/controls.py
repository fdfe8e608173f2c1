"""Control items: is each judge able to do the job before its verdicts count?

Made from the run's own chunks, so they are about the material the judges will judge: a
fact sentence with an answer span blanked out becomes
- an answer control: the passage and the fill-in-the-blank question, asked as the open-book
  check asks (the same prompt): the judge must give the blanked span;
- an accept control: the passage, the question and the blanked span as the proposed answer:
  the judge must say the passage supports it;
- a reject control: the passage, the question and a wrong answer, by turns another short span
  of the passage and a whole other sentence of it: the judge must say the passage does not
  support it.
A judge is able when it is right on at least `[verify] control_accuracy` of each kind, so that
no one-sided habit passes: saying yes to everything fails the rejects, no to everything the
accepts, yes to long answers the short accepts and the long rejects, guessing all three. A judge
below the bar is reported before verification with its figure and the remedy (a stronger model
for that judge), and decides nothing: it does not vote while a judge above it does, and where no
judge passed (`panel_below_bar`) every judge is marked below the bar (`deciding_judges`), so
that each check the panel would decide is held (`judges.panel.Held`; the leak gate of a question
its source answers by construction still runs: `judges.answerability`); `foundry stats` and the
report page show every judge's figure.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from data.documents import answer_candidates, split_sentences
from data.lake import JudgeControl, content_id, utcnow
from data.llm import Endpoint, LLMClient, LLMError
from data.prompts import load_prompt
from data.runtime.answer_match import match
from judges.answerability import MAX_ANSWER_TOKENS, OPEN_BOOK

CHECK = load_prompt(__file__, "control_check")
BLANK = "_____"
KINDS = ("answer", "accept", "reject")
MIN_SENTENCE_CHARS = 25
MAX_SENTENCE_CHARS = 300
MIN_CONTEXT_WORDS = 4  # the words a blanked sentence keeps besides the blank, at least
MIN_LONG_WORDS = 8  # a long wrong answer: another sentence of at least this many words
F1_THRESHOLD = 0.6  # as the default answer verifier


@dataclass(frozen=True)
class Control:
    kind: str  # "answer", "accept" or "reject"
    passage: str
    question: str
    answer: str  # the span (answer, accept), or the wrong answer offered (reject)


def controls_from(chunks: list[str], per_kind: int, seed: str) -> list[Control]:
    """Up to `per_kind` controls of each kind from `chunks` (texts), one fact sentence per
    chunk, in an order drawn from `seed`; the reject controls take a short wrong span and a long
    wrong sentence by turns."""
    order = list(range(len(chunks)))
    random.Random(seed).shuffle(order)
    made: dict[str, list[Control]] = {kind: [] for kind in KINDS}
    for index in order:
        controls = _controls_of(chunks[index], long_reject=len(made["reject"]) % 2 == 1)
        for control in controls:
            if len(made[control.kind]) < per_kind:
                made[control.kind].append(control)
        if all(len(made[kind]) == per_kind for kind in KINDS):
            break
    return [control for kind in KINDS for control in made[kind]]


def _controls_of(passage: str, long_reject: bool) -> list[Control]:
    """The first usable fact sentence of `passage` as an answer and an accept control, and a
    reject control offering a wrong answer from the passage (a whole other sentence where
    `long_reject`, else another span; none where the passage has no such)."""
    sentences = [s for paragraph in passage.split("\n") for s in split_sentences(paragraph)]
    for sentence in sentences:
        if not MIN_SENTENCE_CHARS <= len(sentence) <= MAX_SENTENCE_CHARS:
            continue
        options = answer_candidates(sentence)
        if not options or passage.count(sentence) != 1:  # the blank must be unambiguous
            continue
        answer = options[-1]
        if len(sentence.replace(answer, " ").split()) < MIN_CONTEXT_WORDS:
            continue  # a heading, all blank: nothing to fill it from
        question = "Fill in the blank: " + sentence.replace(answer, BLANK, 1)
        controls = [
            Control("answer", passage, question, answer),
            Control("accept", passage, question, answer),
        ]
        wrong = _wrong_answer(passage, sentence, answer, long_reject)
        if wrong:
            controls.append(Control("reject", passage, question, wrong))
        return controls
    return []


def _wrong_answer(passage: str, sentence: str, answer: str, long: bool) -> str:
    """Text of `passage` that does not fill the blank of `sentence`: another sentence of at
    least MIN_LONG_WORDS words (`long`), or another answer span ("" where there is none)."""
    if long:
        others = [
            s
            for paragraph in passage.split("\n")
            for s in split_sentences(paragraph)
            if s != sentence
            and len(s.split()) >= MIN_LONG_WORDS
            and answer.lower() not in s.lower()
        ]
    else:
        others = [
            s
            for s in answer_candidates(passage)
            if answer.lower() not in s.lower() and s.lower() not in answer.lower()
        ]
    return others[0] if others else ""


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
    said = reply.text.strip().lower()
    return said.startswith("yes" if control.kind == "accept" else "no")


async def measure(controls: list[Control], llm: LLMClient, threshold: float) -> list[JudgeControl]:
    """Each judge's accuracy on `controls` (a control it gave no reply to counts as wrong); a
    judge is competent when each kind's accuracy reaches `threshold`."""
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
        model = llm.model(role)
        records.append(
            JudgeControl(
                control_id=content_id(role, model, CHECK.version, OPEN_BOOK.version, len(controls)),
                role=role,
                model=model,
                items=len(controls),
                correct=correct,
                unanswered=sum(right is None for right in mine),
                accuracy=correct / len(controls) if controls else 0.0,
                threshold=threshold,
                competent=bool(controls) and not _weak_kinds(by_kind, threshold),
                by_kind=by_kind,
                recorded_at=utcnow(),
            )
        )
    return records


def _weak_kinds(by_kind: Mapping[str, Sequence[int]], threshold: float) -> list[str]:
    """The kinds of control a judge got fewer than `threshold` of right."""
    return [kind for kind, (items, right) in by_kind.items() if right < threshold * items]


def deciding_judges(
    endpoints: Mapping[str, Endpoint], latest: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, Endpoint], list[str]]:
    """The endpoints with the judges below the bar left out, where a judge above it remains, and
    the roles left out. `latest` holds each role's latest control record (`latest_controls`);
    a judge counts as below the bar only by a record of its present model. Where no judge is
    above it, every judge stays, marked `below_bar`: the checks they would decide are held
    (`judges.panel.deciding_roles`)."""
    below = _below_bar(endpoints, latest)
    if panel_below_bar(endpoints, latest):
        return {role: replace(e, below_bar=role in below) for role, e in endpoints.items()}, []
    return {role: e for role, e in endpoints.items() if role not in below}, below


def panel_below_bar(endpoints: Mapping[str, Endpoint], latest: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every judge of the panel failed its control items (by a record of its present
    model): its verdicts are then no ground for any decision."""
    judges = [role for role in endpoints if role.startswith("judge:")]
    return bool(judges) and len(_below_bar(endpoints, latest)) == len(judges)


def _below_bar(endpoints: Mapping[str, Endpoint], latest: Sequence[Mapping[str, Any]]) -> list[str]:
    measured = {row["role"]: row for row in latest}
    return [
        role
        for role in endpoints
        if role.startswith("judge:")
        and role in measured
        and measured[role]["model"] == endpoints[role].model
        and not measured[role]["competent"]
    ]


def figure(record: JudgeControl) -> str:
    """A judge's control figure, as said before verification, with each kind's tally."""
    kinds = ", ".join(f"{kind} {right}/{items}" for kind, (items, right) in record.by_kind.items())
    return (
        f"judge {record.role} ({record.model}) got {record.correct} of {record.items} control"
        f" items right ({record.accuracy:.0%}; {kinds})"
    )


def warning(record: JudgeControl) -> str:
    """What to tell the user about a judge below the bar, with the remedy."""
    weak = ", ".join(_weak_kinds(record.by_kind, record.threshold))
    return (
        f"{figure(record)[:-1]}; below {record.threshold:.0%} on {weak}): its verdicts are"
        " unreliable, so it decides no check (where no judge passed its controls, the checks are"
        " held); give that judge a stronger model ([[roles.judges]] model and base_url in"
        " foundry.toml)"
    )
