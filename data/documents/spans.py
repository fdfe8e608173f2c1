"""Answer candidates: the short spans of a sentence that make checkable answers.

Numbers (with their decimal and thousands marks), month-and-year dates, and runs of capitalised
words (a sentence-initial single word such as "The" or "It" is not a name, nor is a single
common word wherever it stands: "True", "All", "However", "Unfortunately" capitalised by a
heading, a list item or a code literal). Working backwards, the answer is chosen among these
before any question exists.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
GENERIC_SHARE = 0.3  # of a corpus's documents a word names, for it to be generic there
MIN_DOCUMENTS = 5  # and in at least this many of them
_NAME_WORD = r"[A-Z][\w'\-]*"
_SPAN = re.compile(
    rf"(?P<date>(?:{MONTHS}) \d{{4}})"
    rf"|(?P<number>\d[\d,]*(?:\.\d+)*)"
    rf"|(?P<name>{_NAME_WORD}(?:(?: of| de| and)? {_NAME_WORD})*)"
)
# words that carry no fact of their own: a blank over one asks nothing a passage answers
BOOLEANS = frozenset({"true", "false", "yes", "no", "none", "null"})
COMMON_WORDS = BOOLEANS | frozenset(
    """a about above after again against all also although always an and another any anything
    are as at be because been before being below both but by can could did do does doing done
    down during each either else even ever every few for from further had has have having he
    her here hers him his how however i if in indeed instead into is it its itself just least
    less many may maybe me might more most much must my neither never nor not nothing now of
    off often on once only or other otherwise our out over own perhaps please quite rather
    really same she should since so some something sometimes still such than that the their
    them then there therefore these they this those though through thus to too under
    unfortunately fortunately unless until up upon us usually very was we were what whatever
    when where whether which while who whom whose why will with within without would yet you
    your note first second finally also however moreover furthermore overall""".split()  # noqa: SIM905 (a readable block)
)


def answer_candidates(sentence: str, generic: frozenset[str] = frozenset()) -> list[str]:
    """Distinct candidate answer spans of `sentence`, in order of appearance, less the words
    `generic` names (`generic_words`)."""
    found: list[str] = []
    for match in _SPAN.finditer(sentence):
        span = match.group().rstrip(".,")
        if match.lastgroup == "name":
            opens = match.start() == 0 or sentence[: match.start()].rstrip().endswith(":")
            if " " not in span and (opens or is_common(span)):
                continue  # "It", or "Added" after "Changed in version 2.0:", is no name
            span = _without_leading_common_words(span)
            if not span or span[0].islower():
                continue
        if span and span not in found and _possessor(span) not in generic:
            found.append(span)
    return found


def _possessor(span: str) -> str:
    """ "Python" for "Python's": a possessive names what its word names."""
    return re.sub(r"['\u2019]s$", "", span)


def generic_words(documents: Sequence[str]) -> frozenset[str]:
    """The single words that are answer candidates in at least `GENERIC_SHARE` of a corpus's
    documents, and in at least `MIN_DOCUMENTS` of them: there they name nothing in particular
    ("Python" in a Python library's documentation), so a blank over one is a guess, not a
    fact."""
    counts = Counter(
        word
        for text in documents
        for word in {span for span in answer_candidates(text) if " " not in span}
        if not word[0].isdigit()
    )
    least = max(GENERIC_SHARE * len(documents), MIN_DOCUMENTS)
    return frozenset(word for word, n in counts.items() if n >= least)


def _without_leading_common_words(span: str) -> str:
    """A name span without the common words a capital put in front of it: "The Museum" is
    "Museum", "With Mypy" is "Mypy", "In Python" is "Python"."""
    words = span.split(" ")
    while len(words) > 1 and words[0].casefold() in COMMON_WORDS:
        words.pop(0)
    return " ".join(words)


def ranked_candidates(sentence: str, generic: frozenset[str] = frozenset()) -> list[str]:
    """`answer_candidates`, the most specific first: dates, then numbers, then names of several
    words, then single words (in order of appearance within each): the blank a reader can check
    and no guess fills."""

    def specificity(span: str) -> int:
        if re.fullmatch(rf"(?:{MONTHS}) \d{{4}}", span):
            return 0
        if span[0].isdigit():
            return 1
        return 2 if " " in span else 3

    return sorted(answer_candidates(sentence, generic), key=specificity)


def is_common(text: str) -> bool:
    """Whether `text` has no word but common ones (words that carry no fact of their own)."""
    return all(word in COMMON_WORDS for word in re.findall(r"[\w']+", text.casefold()))
