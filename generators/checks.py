"""Deterministic checks on a candidate, run before any judge model is asked."""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher

from data.documents import BOOLEANS, is_common

BLANK = "___"
NEAR_MISS_RATIO = 0.85
STEM_CHARS = 5
STOPWORDS = frozenset(
    ["a", "an", "the", "of", "and", "or", "in", "on", "at", "to", "for", "by", "with", "from"]
)
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
# markup a reader should have rendered away: MyST and Sphinx roles, reStructuredText directives
# and field options, MyST directive fences, HTML tags, code marks (backticks)
MARKUP = re.compile(
    r"\{[\w:-]+\}`|(?<![\w`]):[\w:-]+:`|\.\. [\w:-]+::|(?<![\w`]):[\w-]+:(?=\s|$)"
    r"|\{eval-rst\}|</?[a-z][a-z0-9]*(\s[^<>]*)?>|`"
)
LEAD = re.compile(r"^\s*fill in the blank:\s*", re.I)


class CheckFailure(Exception):
    """A candidate failed a check; `reason` is a stable funnel label."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def loose(text: str) -> str:
    """Case-folded, quote-unified, whitespace-collapsed text for containment checks."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return " ".join(text.split())


def contains(haystack: str, needle: str) -> bool:
    """`needle` occurs in `haystack` on word boundaries (after `loose`)."""
    pattern = r"(?<!\w)" + re.escape(loose(needle).rstrip(".")) + r"(?!\w)"
    return re.search(pattern, loose(haystack)) is not None


def check_answer(chunk_text: str, evidence: str, answer: str, max_answer_words: int) -> None:
    """The evidence is quoted from the chunk and the answer is a short span of the evidence
    that states a fact: not a boolean, not only common words."""
    if not evidence.strip() or not answer.strip():
        raise CheckFailure("empty")
    if len(answer.split()) > max_answer_words:
        raise CheckFailure("answer_too_long")
    if not contains(chunk_text, evidence):
        raise CheckFailure("evidence_not_in_chunk")
    if not contains(evidence, answer):
        raise CheckFailure("answer_not_in_evidence")
    if loose(answer).rstrip(".") == loose(evidence).rstrip("."):
        raise CheckFailure("answer_is_whole_evidence")
    if loose(answer).strip(" .!?") in BOOLEANS:
        raise CheckFailure("answer_is_boolean")
    if is_common(answer):
        raise CheckFailure("answer_is_filler")


def check_question(question: str, answer: str, max_question_chars: int) -> None:
    """The question is a question, not too long, does not give its answer away, holds no
    leftover markup and asks about something (a content word besides the blank)."""
    if not question.strip():
        raise CheckFailure("empty")
    if len(question) > max_question_chars:
        raise CheckFailure("question_too_long")
    if BLANK not in question and not question.rstrip().endswith("?"):
        raise CheckFailure("not_a_question")
    if contains(question, answer):
        raise CheckFailure("question_contains_answer")
    if _near_miss(question, answer):
        raise CheckFailure("question_implies_answer")
    if MARKUP.search(question):
        raise CheckFailure("markup_in_question")
    if is_common(LEAD.sub("", question).replace(BLANK, " ")):
        raise CheckFailure("question_without_content")


def check_hint(hint: str, answer: str) -> None:
    """A hint may narrow the answer down but never state it, not even nearly."""
    if contains(hint, answer) or _near_miss(hint, answer):
        raise CheckFailure("hint_contains_answer")


def _near_miss(question: str, answer: str) -> bool:
    """The question holds a near copy of the answer: a run of as many words that is
    >= NEAR_MISS_RATIO similar ("Varrow's" for "Varrow", "1,887" for "1887"), or most of the
    words of a multi-word answer."""
    answer_words = loose(answer).rstrip(".").split()
    question_words = re.findall(r"[\w',.-]*\w", loose(question))
    width = len(answer_words)
    target = " ".join(answer_words)
    for start in range(len(question_words) - width + 1):
        window = " ".join(question_words[start : start + width])
        if SequenceMatcher(None, window, target).ratio() >= NEAR_MISS_RATIO:
            return True
    content = [w for w in answer_words if w not in STOPWORDS]
    shared = sum(w in question_words for w in content)
    return len(content) >= 2 and shared * 2 >= len(content) + 1


def lexical_overlap(question: str, evidence: str, answer: str) -> float:
    """The share of the evidence's content words that the question repeats, the answer's words
    aside (words compared by their first STEM_CHARS letters, a crude stem): near 1.0 for a
    fill-in-the-blank of the evidence, low for a reworded question. Words the question adds do
    not lower it; only leaving the evidence's own words out does."""

    def stems(text: str) -> set[str]:
        words = re.findall(r"\w+", loose(text))
        return {w[:STEM_CHARS] for w in words if len(w) > 2 and w not in STOPWORDS}

    evident = stems(evidence) - stems(answer)
    return len(evident & stems(question)) / len(evident) if evident else 0.0


MIN_LEAK_CHARS = 12  # shorter added lines (`return x`, `)`) say nothing a statement may not


def added_lines(patch: str) -> list[str]:
    """The lines a unified diff adds, stripped, long enough to count as a solution's text."""
    lines = (
        line[1:].strip()
        for line in patch.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    )
    return [line for line in lines if len(line) >= MIN_LEAK_CHARS]


def check_no_leak(statement: str, patch: str) -> None:
    """A task statement must not copy a line the reference patch adds (whitespace aside)."""
    flat = " ".join(statement.split())
    for line in added_lines(patch):
        if " ".join(line.split()) in flat:
            raise CheckFailure("statement_leaks_patch")
