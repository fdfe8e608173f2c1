"""Endpoints: a role bound to a model server, with what that server accepts.

`data.llm.servers` makes them from the configuration (starting the embedded model, probing
the others); here they are plain values that pickle to other processes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from data.costs import Price, price_of
from data.llm.settings import EndpointConfig, ModelSettings

# How structured replies are asked for, from the most to the least the server enforces:
# `response_format` json_schema (OpenAI, vLLM), json_object with a `schema` (llama.cpp's
# server), json_object alone, or no format and the schema in the prompt.
StructuredMode = Literal["json_schema", "json_object_schema", "json_object", "prompt"]
STRUCTURED_MODES: tuple[StructuredMode, ...] = (
    "json_schema",
    "json_object_schema",
    "json_object",
    "prompt",
)


@dataclass(frozen=True)
class Endpoint:
    """A role bound to a reachable server and a model."""

    role: str
    base_url: str
    api_key: str
    model: str
    max_concurrency: int
    timeout_s: float
    max_retries: int
    structured_output: StructuredMode
    supports_n: bool
    tool_calls: bool = True  # returns native tool calls (OpenAI tools API) for `tools`
    temperature: float = 0.0  # for requests that set none
    seed: int | None = None  # for requests that set none
    # USD per million tokens (`priced`: resolved by data.costs.prices); both None: no known price
    price_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None
    headers: tuple[tuple[str, str], ...] = ()  # sent with every request (a proxy's access key)
    upstream: str = ""  # behind a proxy: the server's own URL, where its request limit counts
    # a judge that failed its control items, kept on a panel where no judge passed them: the
    # checks it would decide are held (`judges.controls.deciding_judges`, `judges.panel`)
    below_bar: bool = False

    @property
    def server(self) -> str:
        """The URL of the model server that answers this endpoint's requests."""
        return self.upstream or self.base_url

    @property
    def has_price(self) -> bool:
        return self.price_input_per_mtok is not None or self.price_output_per_mtok is not None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """What the tokens cost in USD; None where the model has no price (no tokens: 0)."""
        if not self.has_price:
            return None if prompt_tokens or completion_tokens else 0.0
        return (
            prompt_tokens * (self.price_input_per_mtok or 0.0)
            + completion_tokens * (self.price_output_per_mtok or 0.0)
        ) / 1e6


def shared_among(endpoints: dict[str, Endpoint], processes: int) -> dict[str, Endpoint]:
    """The endpoints for one of `processes` worker processes: each gets an equal share of every
    server's request limit (at least one request), so that together they keep to it."""
    return {
        role: replace(e, max_concurrency=max(1, e.max_concurrency // processes))
        for role, e in endpoints.items()
    }


def role_configs(config: ModelSettings) -> dict[str, EndpointConfig]:
    """Role name -> endpoint config; judges are `judge:0`, `judge:1`, …"""
    roles = {"generator": config.roles.generator, "solver": config.roles.solver}
    roles.update({f"judge:{i}": judge for i, judge in enumerate(config.roles.judges)})
    return roles


def priced(endpoints: dict[str, Endpoint], config: ModelSettings) -> dict[str, Endpoint]:
    """`endpoints` with their prices resolved (`data.costs.prices.price_of`): their own, else their
    model's in `[prices]` or the shipped table, else 0 on a server on this machine, else none
    (both None)."""
    out = {}
    for role, endpoint in endpoints.items():
        own = (endpoint.price_input_per_mtok, endpoint.price_output_per_mtok)
        price = price_of(endpoint.model, endpoint.server, own, config.prices)
        out[role] = replace(
            endpoint,
            price_input_per_mtok=price.input_per_mtok if price else None,
            price_output_per_mtok=price.output_per_mtok if price else None,
        )
    return out


def unpriced(endpoints: dict[str, Endpoint]) -> dict[str, str]:
    """Role -> model, for the roles whose model has no price."""
    return {role: e.model for role, e in endpoints.items() if not e.has_price}


def role_prices(config: ModelSettings, embedded_model: str) -> dict[str, Price | None]:
    """Each role's price before its server is asked which model it serves: its configured
    model (`embedded_model` for a role on the embedded server) on its configured server, as
    `data.costs.prices.price_of` resolves it; None where unknown."""
    out = {}
    for role, cfg in role_configs(config).items():
        model = cfg.model or (embedded_model if cfg.base_url is None else "")
        own = (cfg.price_input_per_mtok, cfg.price_output_per_mtok)
        out[role] = price_of(model, cfg.base_url, own, config.prices)
    return out
