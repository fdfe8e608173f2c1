"""Settings of the models a run calls: one OpenAI-compatible endpoint per role (`[roles]`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from pydantic import Field

from data.settings import Settings

if TYPE_CHECKING:
    from data.costs import ModelPrice


class EndpointConfig(Settings):
    """One OpenAI-compatible endpoint for one role. No `base_url` means the embedded model."""

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    max_concurrency: int = Field(default=8, ge=1)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    # What the server accepts; None: asked of it once per run (data.llm.servers). json_schema
    # false sends {"type": "json_object", "schema": ...} (llama.cpp's server) instead.
    json_schema: bool | None = None
    supports_n: bool | None = None
    tool_calls: bool | None = None  # whether it returns native tool calls (OpenAI tools API)
    # Sampling for requests whose stage sets none (the judges): a panel can be one model asked
    # with different seeds at a temperature above 0.
    temperature: float = Field(default=0.0, ge=0)
    seed: int | None = None
    # USD per million tokens; unset (or both 0): `[prices]`, the shipped table or free when
    # local, else unknown (data/costs/prices.py)
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)


class RolesConfig(Settings):
    generator: EndpointConfig = EndpointConfig()
    judges: list[EndpointConfig] = Field(default_factory=lambda: [EndpointConfig()], min_length=1)
    solver: EndpointConfig = EndpointConfig()


class ModelSettings(Protocol):
    """What the model room reads of a run's configuration (`data.config.FoundryConfig` has it)."""

    @property
    def roles(self) -> RolesConfig: ...

    @property
    def prices(self) -> Mapping[str, ModelPrice]: ...

    @property
    def embedded_threads(self) -> int: ...


def solver_pointed_at(roles: RolesConfig, model: str, base_url: str | None) -> RolesConfig:
    """`roles` with the solver pointed at `model` (on `base_url`, else on the configured
    solver's server, which must not be the embedded one: it serves a single model)."""
    current = roles.solver
    url = base_url or current.base_url
    if url is None:
        raise ValueError(
            f"the embedded server only serves its own model; give --solver-url for {model}"
        )
    return roles.model_copy(
        update={"solver": current.model_copy(update={"model": model, "base_url": url})}
    )
