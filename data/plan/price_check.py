"""At a run's start: say which models have no price, and refuse a cost limit that could not
hold (a model without a price would spend without counting)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from data.config import ConfigError, FoundryConfig
from data.llm import EMBEDDED_MODEL_ALIAS, Endpoint, role_configs, role_prices, unpriced


class UnpricedError(ConfigError):
    """A cost limit was set for a run that calls a model with no price."""


def _by_model(roles: Mapping[str, str]) -> dict[str, list[str]]:
    models: dict[str, list[str]] = {}
    for role, model in roles.items():
        models.setdefault(model or "(the model its server serves)", []).append(role)
    return models


def _named(roles: Mapping[str, str]) -> str:
    return "; ".join(f"{model} ({', '.join(who)})" for model, who in _by_model(roles).items())


def _remedy(roles: Mapping[str, str]) -> str:
    model = next(iter(_by_model(roles)))
    return (
        f'set its price in foundry.toml: [prices."{model}"] input_per_mtok = …,'
        " output_per_mtok = … (USD per million tokens; 0 if it is free)"
    )


def refuse_cost_limit(roles: Mapping[str, str], max_cost_usd: float | None) -> None:
    """Raise UnpricedError where a cost limit is set and `roles` (role -> model) have models
    with no price."""
    if max_cost_usd is None or not roles:
        return
    raise UnpricedError(
        f"a cost limit (--max-cost or [budget] max_cost_usd = {max_cost_usd:g}) needs a price"
        f" for every model the run calls; none for {_named(roles)}: {_remedy(roles)}, or limit"
        " tokens instead (--max-tokens)"
    )


def unpriced_warning(roles: Mapping[str, str]) -> str:
    """The run-start warning for `roles` (role -> model) whose models have no price."""
    return (
        f"price: no price for {_named(roles)}: its cost is shown as unknown, and totals that"
        f" include it as a lower bound; {_remedy(roles)}"
    )


def check_config(config: FoundryConfig, max_cost_usd: float | None) -> None:
    """Before any server is asked: refuse a cost limit where a role's configured model (or
    the embedded one) has no price. A role that leaves its model to its server is checked
    once the server has said (`check_endpoints`)."""
    prices = role_prices(config, EMBEDDED_MODEL_ALIAS)
    roles = {}
    for role, cfg in role_configs(config).items():
        model = cfg.model or (EMBEDDED_MODEL_ALIAS if cfg.base_url is None else "")
        if model and prices[role] is None:
            roles[role] = model
    refuse_cost_limit(roles, max_cost_usd)


def check_endpoints(
    endpoints: Mapping[str, Endpoint], max_cost_usd: float | None, say: Callable[[str], None]
) -> None:
    """Once the servers are known: say which roles' models have no price, and refuse a cost
    limit if any has none."""
    roles = unpriced(dict(endpoints))
    refuse_cost_limit(roles, max_cost_usd)
    if roles:
        say(unpriced_warning(roles))
