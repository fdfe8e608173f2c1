"""Endpoints: a role bound to a model server, with what that server accepts.

`data.model_servers` makes them from the configuration (starting the embedded model, probing
the others); here they are plain values that pickle to other processes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from data.config import EndpointConfig, FoundryConfig

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
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()  # sent with every request (a proxy's access key)
    upstream: str = ""  # behind a proxy: the server's own URL, where its request limit counts
    # a judge that failed its control items, kept on a panel where no judge passed them: the
    # checks it would decide are held (`judges.controls.deciding_judges`, `judges.panel`)
    below_bar: bool = False

    @property
    def server(self) -> str:
        """The URL of the model server that answers this endpoint's requests."""
        return self.upstream or self.base_url

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.price_input_per_mtok
            + completion_tokens * self.price_output_per_mtok
        ) / 1e6


def shared_among(endpoints: dict[str, Endpoint], processes: int) -> dict[str, Endpoint]:
    """The endpoints for one of `processes` worker processes: each gets an equal share of every
    server's request limit (at least one request), so that together they keep to it."""
    return {
        role: replace(e, max_concurrency=max(1, e.max_concurrency // processes))
        for role, e in endpoints.items()
    }


def role_configs(config: FoundryConfig) -> dict[str, EndpointConfig]:
    """Role name -> endpoint config; judges are `judge:0`, `judge:1`, …"""
    roles = {"generator": config.roles.generator, "solver": config.roles.solver}
    roles.update({f"judge:{i}": judge for i, judge in enumerate(config.roles.judges)})
    return roles


def priced(endpoints: dict[str, Endpoint], config: FoundryConfig) -> dict[str, Endpoint]:
    """`endpoints` with `[prices]` applied: a role whose own prices are 0 takes its model's."""
    out = {}
    for role, endpoint in endpoints.items():
        price = config.prices.get(endpoint.model)
        unpriced = not (endpoint.price_input_per_mtok or endpoint.price_output_per_mtok)
        if price is not None and unpriced:
            endpoint = replace(
                endpoint,
                price_input_per_mtok=price.input_per_mtok,
                price_output_per_mtok=price.output_per_mtok,
            )
        out[role] = endpoint
    return out


def role_prices(config: FoundryConfig, embedded_model: str) -> dict[str, tuple[float, float]]:
    """Each role's prices (input, output; USD per million tokens) before its server is asked
    which model it serves: its own, else its configured model's (`embedded_model` for a role
    on the embedded server) in `[prices]`, else 0."""
    out = {}
    for role, cfg in role_configs(config).items():
        own = (cfg.price_input_per_mtok, cfg.price_output_per_mtok)
        model = cfg.model or (embedded_model if cfg.base_url is None else "")
        price = config.prices.get(model)
        out[role] = (
            own if any(own) or price is None else (price.input_per_mtok, price.output_per_mtok)
        )
    return out
