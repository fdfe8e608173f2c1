"""Solver models with known pass rates per question, whose wrong answers look like the gold: for
evaluations and loop rounds, whose measured pass rates and differences are then not true by
construction.

Each policy (a model name) has a rate per question (0, 1/4, 1/2, 3/4 or 1), given by a function
of the question. It is right on seed s when s % 4 < 4 * rate, so 4 attempts at consecutive
seeds pass exactly 4 * rate times: the true pass rates, and the true difference between two
policies, are known exactly. A wrong answer is the gold beside a rival (`Tessaly Port /
Dunmere`), which token F1 alone would reward. In the document-search environment it answers at
its first turn. Requests for other models, and questions it has no gold for, go to `others`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from generators.doc_qa_variants import HINT_MARK as HINT
from tests.fakes.openai_server import Responder

Rate = Callable[[str], float]  # question (a task's last user message) -> its true pass rate
QUARTERS = (0.0, 0.25, 0.5, 0.75, 1.0)
SEARCH_SYSTEM = "collection of documents"  # harnesses/doc_search_system.md


def hashed_quarter(question: str) -> float:
    """A rate for `question` from its hash, one of `QUARTERS`, none more likely."""
    return QUARTERS[int(hashlib.sha256(question.encode()).hexdigest(), 16) % len(QUARTERS)]


def lookalike(gold: str) -> str:
    """A wrong answer that token F1 would pass: the gold and a rival, as alternatives."""
    rival = "Orvanne" if "dunmere" in gold.lower() else "Dunmere"
    return f"{gold} / {rival}"


class KnownRatePolicies:
    """The responder: `rates` by model name, `answers` the gold by bare question (a live
    mapping may be passed: the oracle's memory, as it writes tasks)."""

    def __init__(
        self, rates: Mapping[str, Rate], answers: Mapping[str, str], others: Responder
    ) -> None:
        self.rates = rates
        self.answers = answers
        self.others = others

    def __call__(self, body: dict[str, Any]) -> str | dict[str, Any]:
        rate = self.rates.get(body.get("model", ""))
        messages = body["messages"]
        searching = messages[0]["role"] == "system" and SEARCH_SYSTEM in messages[0]["content"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        question = (users[0] if searching else users[-1]) if users else ""
        gold = self.answers.get(question.split(HINT)[0])
        if rate is None or gold is None:
            return self.others(body)
        seed = body.get("seed", 0) + body.get("_choice", 0)
        reply = gold if seed % 4 < 4 * rate(question) else lookalike(gold)
        return json.dumps({"tool": "answer", "argument": reply}) if searching else reply
