"""Deterministic checks on a candidate, run before any judge model is asked."""

from __future__ import annotations

import re
import unicodedata

BLANK = "___"
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


class CheckFailure(Exception):
    """A candidate failed a check; `reason` is a stable funnel label."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def loose(text: str) -> str:
    """Case-folded, quote-unified, whitespace-collapsed text for containment checks."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return " ".join(text.split())


def _contains(haystack: str, needle: str) -> bool:
    """`needle` occurs in `haystack` on word boundaries (after `loose`)."""
    pattern = r"(?<!\w)" + re.escape(loose(needle).rstrip(".")) + r"(?!\w)"
    return re.search(pattern, loose(haystack)) is not None


def check_answer(chunk_text: str, evidence: str, answer: str, max_answer_words: int) -> None:
    """The evidence is quoted from the chunk and the answer is a short span of the evidence."""
    if not evidence.strip() or not answer.strip():
        raise CheckFailure("empty")
    if len(answer.split()) > max_answer_words:
        raise CheckFailure("answer_too_long")
    if not _contains(chunk_text, evidence):
        raise CheckFailure("evidence_not_in_chunk")
    if not _contains(evidence, answer):
        raise CheckFailure("answer_not_in_evidence")
    if loose(answer).rstrip(".") == loose(evidence).rstrip("."):
        raise CheckFailure("answer_is_whole_evidence")


def check_question(question: str, answer: str, max_question_chars: int) -> None:
    """The question is a question, not too long, and does not give its answer away."""
    if not question.strip():
        raise CheckFailure("empty")
    if len(question) > max_question_chars:
        raise CheckFailure("question_too_long")
    if BLANK not in question and not question.rstrip().endswith("?"):
        raise CheckFailure("not_a_question")
    if _contains(question, answer):
        raise CheckFailure("question_contains_answer")
