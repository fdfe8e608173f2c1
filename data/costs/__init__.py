"""Money: what a model costs (the shipped price table, `[prices]`, unknown where neither
says), a cost with its unknown parts, the ledger of live calls and a run's budget."""

from data.costs.budget import Budget
from data.costs.cost import PRICED_SQL, UNPRICED_SQL, Cost, row_cost
from data.costs.ledger import (
    CHARS_PER_TOKEN,
    carried_spend,
    format_ledger,
    ledger_path,
    ledger_summary,
    open_ledger,
    read_spend,
    record_sent,
    record_settled,
)
from data.costs.prices import Price, is_local, price_of, shipped_price, shipped_prices
from data.costs.settings import BudgetConfig, ModelPrice

__all__ = [
    "Budget",
    "BudgetConfig",
    "CHARS_PER_TOKEN",
    "Cost",
    "ModelPrice",
    "PRICED_SQL",
    "Price",
    "UNPRICED_SQL",
    "carried_spend",
    "format_ledger",
    "is_local",
    "ledger_path",
    "ledger_summary",
    "open_ledger",
    "price_of",
    "read_spend",
    "record_sent",
    "record_settled",
    "row_cost",
    "shipped_price",
    "shipped_prices",
]
