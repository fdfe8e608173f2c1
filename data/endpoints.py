"""Resolve configured roles into endpoints; start the embedded model if a role needs it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import openai

from data.config import EndpointConfig, FoundryConfig
from data.embedded import EMBEDDED_MODEL_ALIAS, embedded_server


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
    json_schema: bool
    supports_n: bool
    temperature: float = 0.0  # for requests that set none
    seed: int | None = None  # for requests that set none
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()  # sent with every request (a proxy's access key)
    upstream: str = ""  # behind a proxy: the server's own URL, where its request limit counts

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


def first_listed_model(base_url: str, api_key: str) -> str:
    """The first model an OpenAI-compatible server lists at `/models`."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=2, timeout=30)
    try:
        models = client.models.list().data
    finally:
        client.close()
    if not models:
        raise RuntimeError(f"{base_url} lists no models; set FOUNDRY_MODEL or a model per role")
    return models[0].id


@contextmanager
def resolve_endpoints(config: FoundryConfig, log_dir: Path) -> Iterator[dict[str, Endpoint]]:
    """Yield role -> Endpoint; the embedded server (if used) lives exactly as long as this."""
    roles = role_configs(config)
    with ExitStack() as stack:
        embedded_url = None
        if any(cfg.base_url is None for cfg in roles.values()):
            log_dir.mkdir(parents=True, exist_ok=True)
            embedded_url = stack.enter_context(
                embedded_server(config.embedded_threads, log_path=log_dir / "embedded-llm.log")
            )
        yield {role: _bind(role, cfg, embedded_url) for role, cfg in roles.items()}


def _bind(role: str, cfg: EndpointConfig, embedded_url: str | None) -> Endpoint:
    if cfg.base_url is None:
        if embedded_url is None:
            raise RuntimeError(f"role {role} needs the embedded model, which was not started")
        # llama-cpp-python: json_object + schema, no `n`, one request at a time.
        return Endpoint(
            role=role,
            base_url=embedded_url,
            api_key="embedded",
            model=EMBEDDED_MODEL_ALIAS,
            max_concurrency=1,
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
            json_schema=False,
            supports_n=False,
            temperature=cfg.temperature,
            seed=cfg.seed,
        )
    api_key = cfg.api_key or "none"
    return Endpoint(
        role=role,
        base_url=cfg.base_url,
        api_key=api_key,
        model=cfg.model or first_listed_model(cfg.base_url, api_key),
        max_concurrency=cfg.max_concurrency,
        timeout_s=cfg.timeout_s,
        max_retries=cfg.max_retries,
        json_schema=cfg.json_schema,
        supports_n=cfg.supports_n,
        temperature=cfg.temperature,
        seed=cfg.seed,
        price_input_per_mtok=cfg.price_input_per_mtok,
        price_output_per_mtok=cfg.price_output_per_mtok,
    )
