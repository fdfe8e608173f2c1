"""Answer matching with the standard library only: numbers by value, else normalised exact
match and token F1.

Token F1 pays for extra tokens, so two tricks are refused before it is computed: an answer
that names the gold among other candidates ("Paris, London", "1887, 1878", "Paris or maybe
Lyon") and, where the question is known, an answer padded with the question's own text.

The one implementation of the `exact_or_f1` verifier. Exported taskset packages ship a copy of
this file as it is (see `data/export/verifiers_package.py`), so it must import nothing but the
standard library.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from decimal import Decimal, InvalidOperation
from difflib import SequenceMatcher

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "\u2018\u2019\u201c\u201d\u2013\u2014")
_ANSWER_PREFIX = re.compile(r"^\s*(final answer|answer)\s*[:\-]\s*", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation (so "2,200" == "2200") and articles, collapse whitespace."""
    text = unicodedata.normalize("NFKC", text).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def final_answer(completion: str) -> str:
    """The answer part of a completion: its first non-empty line, minus an "Answer:" prefix."""
    for line in completion.strip().splitlines():
        if line.strip():
            return _ANSWER_PREFIX.sub("", line).strip()
    return ""


def exact_match(prediction: str, gold: str) -> bool:
    return bool(normalize_answer(gold)) and normalize_answer(prediction) == normalize_answer(gold)


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD-style token F1 between normalised answers."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")
_CURRENCY = "$\u20ac\u00a3\u00a5"


def as_number(text: str) -> Decimal | None:
    """The value of an answer that is a plain number ("2,200", "$1.50", "-3", "12.5%"), else
    None. Thousands separators, a currency sign and a percent sign are allowed, nothing else."""
    text = text.strip().rstrip(".").strip()
    text = text.removesuffix("%").strip().lstrip(_CURRENCY).strip()
    if not _NUMBER.fullmatch(text):
        return None
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def fill_of(answer: str, context: list[str]) -> str:
    """What an answer that repeats a fill-in-the-blank sentence put in the blank."""
    before, after = (normalize_answer(c) for c in context)
    text = normalize_answer(answer)
    if before and text.startswith(before + " "):
        text = text[len(before) :].strip()
    if after and text.endswith(" " + after):
        text = text[: -len(after)].strip()
    return text


# an explicit alternative: whatever it sets beside the gold is another candidate
_ALTERNATIVE = re.compile(
    r"\b(?:or|either|maybe|perhaps|possibly|probably|alternatively|otherwise|else)\b|[/|]",
    re.IGNORECASE,
)
# an enumeration: what it sets beside the gold is a candidate when it is of the gold's kind, or
# a name or a number of any kind ("February 1934, Dunmere Falls"): only a descriptive phrase
# ("Tessaly Port, in the north") may stand beside the gold
ENTITIES = ("name", "number")
_ENUMERATION = re.compile(r"[;?!]|,(?!(?<=\d,)\d{3}(?!\d))|\b(?:and|nor)\b|\s[-\u2013\u2014]\s")
_GOLD = "\x00"  # stands in for the gold answer's own words, which may hold a comma or an "and"
ECHO_SHARE = 0.8  # a run of the question this long (share of its words) is padding


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text)


# words that are no candidate of their own: "it might be Paris" names one place
_FILLER = frozenset(
    _words(
        "a an the it its is was are were be been being i we you he she they this that these those"
        " think guess believe might may could would should must can will likely sure not answer"
        " final of in on at to for by with from as which who what where when how one so about"
        " around roughly approximately circa exactly just only"
    )
)


def _kind(text: str) -> str:
    """A candidate's kind: a number, a name (its words capitalised, short lower-case joining
    words such as "of" or "and" aside) or a phrase."""
    words = [w for w in _words(text) if not (w.islower() and len(w) <= 3)]
    if any(ch.isdigit() for word in words for ch in word):
        return "number"
    return "name" if words and all(word[0].isupper() for word in words) else "phrase"


def _content(text: str) -> set[str]:
    """The normalised words of `text` that are not filler."""
    return {word for word in normalize_answer(text).split() if word not in _FILLER}


def rival_candidates(answer: str, gold: str) -> list[str]:
    """The candidates an answer names beside the gold one: the parts between explicit
    alternatives ("or", "maybe", "/"), and the parts of an enumeration (commas, "and") that are
    of the gold's kind or are names or numbers (a place beside a date). Only an answer that has
    a part giving the gold (its words, or some of them and nothing else) has rivals; a part of
    filler words only is none."""
    words = _words(gold)
    if not words:
        return []
    masked = re.sub(
        r"(?<!\w)" + r"[\W_]+".join(map(re.escape, words)) + r"(?!\w)",
        f" {_GOLD} ",
        answer,
        flags=re.IGNORECASE,
    )
    hedged = bool(_ALTERNATIVE.search(masked))
    gold_words, gold_kind = set(normalize_answer(gold).split()), _kind(gold)
    gives_gold, rivals = False, []
    for part in _ENUMERATION.split(_ALTERNATIVE.sub(";", masked)):
        content = _content(part.replace(_GOLD, " "))
        if _GOLD in part or (content and content <= gold_words):
            gives_gold = True
        elif content and (hedged or _kind(part) in {gold_kind, *ENTITIES}):
            rivals.append(part.strip())
    return rivals if gives_gold else []


def echoed_question(answer: str, question: str) -> str:
    """The run of the question's words an answer repeats, when it is most of the question (at
    least three words and `ECHO_SHARE` of them); else ""."""
    asked, said = normalize_answer(question).split(), normalize_answer(answer).split()
    run = SequenceMatcher(None, said, asked, autojunk=False).find_longest_match()
    longest = said[run.a : run.a + run.size]
    enough = len(longest) >= 3 and len(longest) >= ECHO_SHARE * len(asked)
    return " ".join(longest) if enough else ""


def _gamed(answer: str, gold: str, question: str) -> str:
    """Why `answer` (a final answer, not the gold itself) games token F1, or ""."""
    rivals = rival_candidates(answer, gold)
    if rivals:
        return f"several candidate answers: {', '.join(rivals)}"[:200]
    echoed = echoed_question(answer, question) if question else ""
    return f"padded with the question: {echoed}"[:200] if echoed else ""


def refusal(
    completion: str, gold: str, context: list[str] | tuple[str, ...] = (), question: str = ""
) -> str:
    """Why the completion's answer is refused whatever it means (`match` scores it 0.0 before
    token F1): it names other candidates beside the gold, or repeats most of the question; ""
    when it does neither, or is the gold answer itself."""
    written = answer = final_answer(completion)
    if context and answer:
        answer = fill_of(answer, list(context))
    if not answer or exact_match(answer, gold):
        return ""
    return _gamed(written, gold, question) or _gamed(answer, gold, question)


def match(
    completion: str,
    gold: str,
    f1_threshold: float,
    context: list[str] | tuple[str, ...] = (),
    question: str = "",
) -> tuple[float, str, bool]:
    """(reward, why, exact): 1.0 if the completion's answer matches the gold answer by value
    (both plain numbers), else by normalised exact match or token F1 >= `f1_threshold`; else
    0.0. An answer that names other candidates beside the gold, or repeats most of `question`
    (the task's question, where known), scores 0.0 before token F1. `context` is the text
    before and after a fill-in-the-blank task's blank."""
    answer = final_answer(completion)
    expected, given = as_number(gold), as_number(answer)
    if expected is not None and given is not None:  # by value: "1.5" is not "15"
        if given == expected:
            return 1.0, "numeric match", True
        return 0.0, f"numeric mismatch: {given} is not {expected}", False
    written = answer
    if context and answer:
        answer = fill_of(answer, list(context))
    if not answer:
        return 0.0, "empty answer", False
    if exact_match(answer, gold):
        return 1.0, "exact match", True
    # as written too: a fill's normal form has lost the commas and slashes between candidates
    gamed = _gamed(written, gold, question) or _gamed(answer, gold, question)
    if gamed:
        return 0.0, gamed, False
    f1 = token_f1(answer, gold)
    if f1 >= f1_threshold:
        return 1.0, f"token F1 {f1:.2f} >= {f1_threshold}", False
    return 0.0, f"token F1 {f1:.2f} < {f1_threshold}", False
