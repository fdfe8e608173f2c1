"""Settings of what a run may spend and what models cost (`[budget]`, `[prices."<model>"]`)."""

from __future__ import annotations

from pydantic import Field

from data.settings import Settings


class ModelPrice(Settings):
    """What a model costs, USD per million tokens (`[prices."<model>"]`)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class BudgetConfig(Settings):
    """A run's LLM budget (data/costs/budget.py): live tokens and cost at the models' prices
    (data/costs/prices.py). When one is reached the run finishes what is in flight, exports, and
    leaves the rest pending. A cost limit is refused where a model the run calls has no price."""

    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
