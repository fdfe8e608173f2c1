"""A cost that may be partly unknown: the money at known prices, and the models without one.

Wherever a cost is shown or stored, a model with no price (`data.costs.prices`) makes it unknown,
never 0: in JSON `cost_usd` is null, `cost_usd_at_least` the part at known prices and
`unpriced_models` names the models; in text it reads "unknown (no price for X)", or "at least
$0.0123 (no price for X)" where some of it is priced.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# SQL over `llm_calls`: the live calls' cost at known prices, and the models of live calls
# that have none (`cost_usd` is NULL where the model had no price)
PRICED_SQL = "coalesce(sum(cost_usd) FILTER (WHERE NOT cached), 0)::DOUBLE"
UNPRICED_SQL = "list(DISTINCT model ORDER BY model) FILTER (WHERE cost_usd IS NULL AND NOT cached)"


@dataclass(frozen=True)
class Cost:
    """`priced_usd` spent at known prices, plus whatever `unpriced` models (sorted) cost."""

    priced_usd: float = 0.0
    unpriced: tuple[str, ...] = ()

    @classmethod
    def of(cls, priced_usd: float | None, unpriced: Iterable[str] | None = ()) -> Cost:
        return cls(float(priced_usd or 0.0), tuple(sorted(set(unpriced or ()))))

    @property
    def usd(self) -> float | None:
        """The whole cost, or None where part of it has no price."""
        return None if self.unpriced else self.priced_usd

    @property
    def known(self) -> bool:
        return not self.unpriced

    def __add__(self, other: Cost) -> Cost:
        return Cost.of(self.priced_usd + other.priced_usd, (*self.unpriced, *other.unpriced))

    def scaled(self, factor: float) -> Cost:
        return Cost(self.priced_usd * factor, self.unpriced)

    def text(self, digits: int = 4) -> str:
        """The cost in words: "$0.0123", "at least $0.0123 (no price for X)" or "unknown (no
        price for X)"."""
        money = f"${self.priced_usd:.{digits}f}"
        if self.known:
            return money
        why = f"no price for {', '.join(self.unpriced)}"
        return f"at least {money} ({why})" if self.priced_usd > 0 else f"unknown ({why})"

    def to_json(
        self, key: str = "cost_usd", models: str = "unpriced_models", digits: int = 6
    ) -> dict[str, Any]:
        """`key` (null where unknown), `<key>_at_least` (the part at known prices) and
        `models` (the unpriced models)."""
        usd = round(self.priced_usd, digits)
        return {
            key: usd if self.known else None,
            f"{key}_at_least": usd,
            models: list(self.unpriced),
        }

    @classmethod
    def from_json(
        cls, figures: dict[str, Any], key: str = "cost_usd", models: str = "unpriced_models"
    ) -> Cost:
        """The cost `to_json` wrote into `figures`."""
        return cls.of(figures[f"{key}_at_least"], figures[models])


def row_cost(row: dict[str, Any]) -> Cost:
    """The cost of a row that selected `PRICED_SQL AS priced_usd, UNPRICED_SQL AS unpriced`."""
    return Cost.of(row["priced_usd"], row["unpriced"])
