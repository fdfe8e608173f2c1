"""Reward functions: score an attempt against the gold answer as the task's verifier spec says.

Used by the judges (answerability), by calibration (pass rates) and by trainers: `verifier_reward`
has the signature of a TRL `GRPOTrainer` reward function and reads the taskset's own columns.
"""

from __future__ import annotations

import json
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable
from typing import Any

from data.records import Attempt, VerifierSpec
from judges import tool_calls
from judges.score import Score

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


def distinct_attempts(
    attempts: list[Attempt], keep: Callable[[Attempt], bool], limit: int
) -> list[Attempt]:
    """Up to `limit` attempts that `keep` accepts, one per distinct non-empty answer, in attempt
    order (an answer given several times is shown to a judge once)."""
    chosen: dict[str, Attempt] = {}
    for attempt in sorted(attempts, key=lambda a: a.index):
        answer = normalize_answer(final_answer(attempt.response))
        if answer and answer not in chosen and keep(attempt):
            chosen[answer] = attempt
    return list(chosen.values())[:limit]


def fill_of(answer: str, context: list[str]) -> str:
    """What an answer that repeats a fill-in-the-blank sentence put in the blank."""
    before, after = (normalize_answer(c) for c in context)
    text = normalize_answer(answer)
    if before and text.startswith(before + " "):
        text = text[len(before) :].strip()
    if after and text.endswith(" " + after):
        text = text[: -len(after)].strip()
    return text


def score(spec: VerifierSpec, completion: str, gold: str) -> Score:
    """1.0 if the completion's answer matches the gold answer under `spec`, else 0.0."""
    answer = final_answer(completion)
    if spec.context and answer:
        answer = fill_of(answer, spec.context)
    if not answer:
        return Score(0.0, "empty answer")
    if exact_match(answer, gold):
        return Score(1.0, "exact match", exact=True)
    f1 = token_f1(answer, gold)
    if f1 >= spec.f1_threshold:
        return Score(1.0, f"token F1 {f1:.2f} >= {spec.f1_threshold}")
    return Score(0.0, f"token F1 {f1:.2f} < {spec.f1_threshold}")


# --- for trainers ------------------------------------------------------------------------

Completion = str | list[dict[str, Any]]


def completion_text(completion: Completion) -> str:
    """The text of a trainer's completion: the string itself (standard format), or the last
    assistant message's content (conversational format)."""
    if isinstance(completion, str):
        return completion
    replies = [
        m.get("content") or "" for m in completion if m.get("role", "assistant") == "assistant"
    ]
    return str(replies[-1]) if replies else ""


def columns_of(
    verifier: list[str | dict[str, Any]], solution: list[str] | None, answer: list[str] | None
) -> tuple[list[VerifierSpec], list[str]]:
    """The verifier specs and gold answers of a trainer's batch (`solution`, else `answer`)."""
    golds = solution if solution is not None else answer
    if golds is None:
        raise ValueError("a reward function needs a `solution` or `answer` column")
    specs = [
        VerifierSpec.model_validate(json.loads(v) if isinstance(v, str) else v) for v in verifier
    ]
    if len(specs) != len(golds):
        raise ValueError(f"{len(specs)} verifier specs for {len(golds)} gold answers")
    return specs, golds


def verifier_reward(
    prompts: list[Any],
    completions: list[Completion],
    verifier: list[str | dict[str, Any]],
    solution: list[str] | None = None,
    answer: list[str] | None = None,
    **columns: Any,
) -> list[float | None]:
    """A TRL reward function (`reward_funcs=[verifier_reward]`) for the verifiers that need no
    model and no sandbox: `exact_or_f1` (normalised exact match, else token F1 against the
    threshold) and `tool_calls` (the share of expected calls made in order). Every other
    verifier type gets None, which TRL leaves to the other reward functions. The gold answer
    is the `solution` column (trainer projections) or `answer` (the canonical taskset); the
    spec is the `verifier` column, as JSON or as a dict."""
    rewards: list[float | None] = []
    specs, golds = columns_of(verifier, solution, answer)
    for completion, spec, gold in zip(completions, specs, golds, strict=True):
        text = completion_text(completion)
        if spec.type == "exact_or_f1":
            rewards.append(score(spec, text, gold).reward)
        elif spec.type == "tool_calls":
            rewards.append(tool_calls.grade(spec, text).reward)
        else:
            rewards.append(None)
    return rewards
