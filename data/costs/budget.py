"""A run's LLM budget: the live tokens and money spent so far against the configured limits.

The LLM client charges every live reply (cache hits are free) and refuses new requests once a
limit is reached; requests already in flight finish and are charged, so a run can end slightly
over its budget, never with a reply thrown away. With a `ledger`, every live request is written
ahead to it (`data.costs.ledger`); a run that resumes unfinished ones starts from their spend
(`carried_usd`). A live call to a model with no price (`data.costs.prices`) adds its tokens and
names its model in `unpriced`: the cost spent is then a lower bound (`spent`), and a cost limit is
not to be set for such a run (`flows.pipeline` refuses it).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from data.costs.cost import Cost
from data.costs.ledger import record_sent, record_settled


@dataclass
class Budget:
    max_tokens: int | None = None  # None: no limit
    max_cost_usd: float | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    ledger: Path | None = None  # this run's spend ledger
    carried_usd: float = 0.0  # spent by the unfinished runs this one resumes
    carried_tokens: int = 0
    carried_runs: int = 0
    unpriced: tuple[str, ...] = ()  # models of the live calls whose cost is unknown
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def sent(self, call_id: str, role: str, model: str, bound_usd: float | None) -> None:
        """A live request is about to leave: its ledger line, before it does."""
        if self.ledger is not None:
            record_sent(self.ledger, call_id, role, model, bound_usd)

    def charge(
        self,
        tokens: int,
        cost_usd: float | None,
        call_id: str = "",
        error: str = "",
        model: str = "",
    ) -> None:
        """A live request's spend (`cost_usd` None: `model` has no price), settled in the
        ledger where it was written ahead."""
        with self._lock:
            self.tokens += tokens
            if cost_usd is None:
                self.unpriced = tuple(sorted({*self.unpriced, model}))
            else:
                self.cost_usd += cost_usd
        if self.ledger is not None and call_id:
            record_settled(self.ledger, call_id, tokens, cost_usd, error)

    def settle(self, tokens: int, cost_usd: float, unpriced: tuple[str, ...] = ()) -> None:
        """Raise the spend to what the run is known to have spent (its recorded calls, and what
        it carried): batches on other processes charge their own copies of the budget."""
        with self._lock:
            self.tokens = max(self.tokens, self.carried_tokens + tokens)
            self.cost_usd = max(self.cost_usd, self.carried_usd + cost_usd)
            self.unpriced = tuple(sorted({*self.unpriced, *unpriced}))

    @property
    def spent(self) -> Cost:
        """The cost spent: at known prices, and the models whose calls have none."""
        return Cost.of(self.cost_usd, self.unpriced)

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
        return f"{self.tokens:,} of {tokens} tokens, {self.spent.text()} of {cost}"

    def report(self) -> dict[str, object]:
        return {
            "max_tokens": self.max_tokens,
            "max_cost_usd": self.max_cost_usd,
            "tokens": self.tokens,
            **self.spent.to_json(),
            "exhausted": self.exhausted,
            "carried_usd": round(self.carried_usd, 6),
            "carried_runs": self.carried_runs,
            "ledger": str(self.ledger) if self.ledger else None,
        }
