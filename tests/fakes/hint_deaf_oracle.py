"""The oracle with a solver that a hint helps on some questions only, and a generator whose
harder variants of some facts leak the answer or name their link: for the repair loop, whose
rescues are then not true by construction.

The solver's pass rate on a question is fixed by hashes the pipeline never sees
(`pass_rate`): 0, 1/2 or 1 on the bare question (0 on half the questions), one step up with a
hint only where `hint_helps` says so (about half the questions); on the others a hint changes
nothing, and reading a passage never helps. It is right on seed s when s % 2 < 2 * rate, so k
attempts at consecutive seeds (k even) pass exactly k * rate times, and `band` is what a
correct calibration measures. On a fact that `leaks` picks (about half), the generator rewords
a question into one that still holds the answer and writes a two-fact question that names its
link; on the others it writes as the oracle does. Everything else is the oracle's.
"""

from __future__ import annotations

import hashlib
from typing import Any

from generators.doc_qa_variants import HINT_MARK as HINT
from tests.fakes.oracle import Oracle, _line

SKILLS = (0, 0, 1, 2)  # right on this many of 2 seeds, unhinted: half the questions never
BANDS = {0.0: "too_hard", 0.5: "in_band", 1.0: "too_easy"}  # for the default band 0.2-0.8


def _bucket(text: str, salt: str, buckets: int) -> int:
    return int(hashlib.sha256(f"{salt}/{text}".encode()).hexdigest(), 16) % buckets


class HintDeafOracle(Oracle):
    """Call it as the oracle; `pass_rate`, `band`, `hint_helps` and `leaks` say what it does."""

    def hint_helps(self, bare_question: str) -> bool:
        return _bucket(bare_question, "hint", 2) == 0

    def leaks(self, fact: str) -> bool:
        return _bucket(fact, "leak", 2) == 0

    def pass_rate(self, question: str) -> float:
        """The true pass rate on `question` (a task's last user message)."""
        bare = question.split(HINT)[0]
        if bare not in self.answers:
            return 0.0
        skill = SKILLS[_bucket(bare, "skill", len(SKILLS))]
        if HINT in question and self.hint_helps(bare):
            skill = min(skill + 1, 2)
        return skill / 2

    def band(self, question: str) -> str:
        return BANDS[self.pass_rate(question)]

    def respond(
        self, role: str, messages: list[dict[str, str]], params: dict[str, Any]
    ) -> str | dict[str, Any]:
        prompt = messages[-1]["content"] if messages[-1]["role"] == "user" else ""
        if prompt.startswith("Reword a quiz question.") and self.leaks(_line(prompt, "Fact")):
            fact = _line(prompt, "Fact").rstrip(".")
            return self._remember(f"What completes this: {fact}?", _line(prompt, "Answer"))
        if prompt.startswith("Write one quiz question that needs two facts.") and self.leaks(
            _line(prompt, "Fact 1")
        ):
            fact, answer = _line(prompt, "Fact 1"), _line(prompt, "Answer")
            blanked = fact.replace(answer, "___", 1).rstrip(".")
            link = _line(prompt, "Link")
            return self._remember(f"Fill the blank, of {link}: {blanked}?", answer)
        return super().respond(role, messages, params)

    def _solve(self, question: str, params: dict[str, Any]) -> str:
        seed = params.get("seed", 0) + params.get("_choice", 0)
        if seed % 2 < 2 * self.pass_rate(question):
            return self.answers[question.split(HINT)[0]]
        return "something else"
