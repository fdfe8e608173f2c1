"""A run's LLM budget: the live tokens and money spent so far against the configured limits.

The LLM client charges every live reply (cache hits are free) and refuses new requests once a
limit is reached; requests already in flight finish and are charged, so a run can end slightly
over its budget, never with a reply thrown away.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Budget:
    max_tokens: int | None = None  # None: no limit
    max_cost_usd: float | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def charge(self, tokens: int, cost_usd: float) -> None:
        with self._lock:
            self.tokens += tokens
            self.cost_usd += cost_usd

    def settle(self, tokens: int, cost_usd: float) -> None:
        """Raise the spend to what the run is known to have spent (its recorded calls): batches
        on other processes charge their own copies of the budget."""
        with self._lock:
            self.tokens = max(self.tokens, tokens)
            self.cost_usd = max(self.cost_usd, cost_usd)

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    @property
    def exhausted(self) -> bool:
        over_tokens = self.max_tokens is not None and self.tokens >= self.max_tokens
        over_cost = self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd
        return over_tokens or over_cost

    def describe(self) -> str:
        """What was spent of what, e.g. "12,345 of 10,000 tokens, $0.0123 of no limit"."""
        tokens = f"{self.max_tokens:,}" if self.max_tokens is not None else "no limit"
        cost = f"${self.max_cost_usd:.4f}" if self.max_cost_usd is not None else "no limit"
        return f"{self.tokens:,} of {tokens} tokens, ${self.cost_usd:.4f} of {cost}"

    def report(self) -> dict[str, object]:
        return {
            "max_tokens": self.max_tokens,
            "max_cost_usd": self.max_cost_usd,
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "exhausted": self.exhausted,
        }
