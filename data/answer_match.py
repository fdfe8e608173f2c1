"""Answer matching with the standard library only: numbers by value, else normalised exact
match and token F1.

The one implementation of the `exact_or_f1` verifier. Exported taskset packages ship a copy of
this file as it is (see `data/verifiers_package.py`), so it must import nothing but the
standard library.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from decimal import Decimal, InvalidOperation

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


def match(
    completion: str, gold: str, f1_threshold: float, context: list[str] | tuple[str, ...] = ()
) -> tuple[float, str, bool]:
    """(reward, why, exact): 1.0 if the completion's answer matches the gold answer by value
    (both plain numbers), else by normalised exact match or token F1 >= `f1_threshold`; else
    0.0. `context` is the text before and after a fill-in-the-blank task's blank."""
    answer = final_answer(completion)
    expected, given = as_number(gold), as_number(answer)
    if expected is not None and given is not None:  # by value: "1.5" is not "15"
        if given == expected:
            return 1.0, "numeric match", True
        return 0.0, f"numeric mismatch: {given} is not {expected}", False
    if context and answer:
        answer = fill_of(answer, list(context))
    if not answer:
        return 0.0, "empty answer", False
    if exact_match(answer, gold):
        return 1.0, "exact match", True
    f1 = token_f1(answer, gold)
    if f1 >= f1_threshold:
        return 1.0, f"token F1 {f1:.2f} >= {f1_threshold}", False
    return 0.0, f"token F1 {f1:.2f} < {f1_threshold}", False
