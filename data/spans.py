"""Answer candidates: the short spans of a sentence that make checkable answers.

Numbers (with their decimal and thousands marks), month-and-year dates, and runs of capitalised
words (a sentence-initial single word such as "The" or "It" is not a name). Working backwards,
the answer is chosen among these before any question exists.
"""

from __future__ import annotations

import re

MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_NAME_WORD = r"[A-Z][\w'\-]*"
_SPAN = re.compile(
    rf"(?P<date>(?:{MONTHS}) \d{{4}})"
    rf"|(?P<number>\d[\d,]*(?:\.\d+)?)"
    rf"|(?P<name>{_NAME_WORD}(?:(?: of| de| and)? {_NAME_WORD})*)"
)
_LEADING_ARTICLE = re.compile(r"^(The|A|An) ")


def answer_candidates(sentence: str) -> list[str]:
    """Distinct candidate answer spans of `sentence`, in order of appearance."""
    found: list[str] = []
    for match in _SPAN.finditer(sentence):
        span = match.group().rstrip(".,")
        if match.lastgroup == "name":
            if match.start() == 0 and " " not in span:
                continue
            span = _LEADING_ARTICLE.sub("", span)
            if not span or span[0].islower():
                continue
        if span and span not in found:
            found.append(span)
    return found
