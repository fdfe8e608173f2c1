"""The model servers of a run: the embedded one started, every other one checked and probed.

Before any stage spends time, each distinct server and model a role points at is asked, with
that role's retries:
- whether it answers, takes the key and serves the model; if not, `EndpointError` says so in
  one line naming the setting to change;
- which structured-output mode it accepts (`json_schema` → `json_object` + schema →
  `json_object` → schema in the prompt), unless `json_schema` is configured;
- whether it honours `n` (one request for several samples), unless `supports_n` is configured;
- whether it returns native tool calls (OpenAI tools API), unless `tool_calls` is configured.
Each server's modes are said once on stderr.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple, TypeVar

from pydantic import BaseModel

from data.llm.client import LLMClient, LLMError, RefusedError
from data.llm.embedded import EMBEDDED_MODEL_ALIAS, embedded_server
from data.llm.endpoints import Endpoint, StructuredMode, priced, role_configs
from data.llm.settings import EndpointConfig, ModelSettings
from data.runtime.errors import ReasonedError

PROBE_ROLE = "probe"
# Once a server has answered (its model list), the probe retries transient failures at least
# this often: behind a flaky proxy (30% faults) four in a row are met (0.8% a request), seven
# about once in 5,000. The first contact keeps the role's retries, so that a closed port is
# said after the role's backoff (about 7 s by default), not 20 s.
PROBE_MIN_RETRIES = 6
PROBE_TRIES = 3  # and asks again this often when the reply is empty or unreadable
CONTENT_FAULTS = frozenset({"empty_response", "bad_response"})
T = TypeVar("T")
PROBE_MESSAGES = [{"role": "user", "content": 'Reply with the JSON object {"ok": true}.'}]
PROBE_TOOL_NAME = "report_ready"
PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": PROBE_TOOL_NAME,
        "description": "Report that you are ready.",
        "parameters": {
            "type": "object",
            "properties": {"ready": {"type": "boolean"}},
            "required": ["ready"],
        },
    },
}
PROBE_TOOL_MESSAGES = [
    {"role": "user", "content": f"Call the tool {PROBE_TOOL_NAME} with ready set to true."}
]
PROBE_TOOL_MAX_TOKENS = 256  # room for a model that thinks before it calls
MODE_NAMES: dict[StructuredMode, str] = {
    "json_schema": "json_schema",
    "json_object_schema": "json_object + schema",
    "json_object": "json_object (schema in the prompt)",
    "prompt": "none (schema in the prompt)",
}


class EndpointError(ReasonedError):
    """A model server a role needs cannot be used; the message is one line for people."""

    def __init__(self, detail: str) -> None:
        super().__init__("model_server_unusable", detail)

    def __str__(self) -> str:
        return self.detail


class _Probe(BaseModel):
    ok: bool


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def resolve_endpoints(
    config: ModelSettings, log_dir: Path, say: Callable[[str], None] = _stderr
) -> Iterator[dict[str, Endpoint]]:
    """Yield role -> Endpoint, every server checked and its capabilities known; the embedded
    server (if a role uses it) lives exactly as long as this. Raises EndpointError (or
    EmbeddedModelError) before yielding when a server cannot be used."""
    roles = role_configs(config)
    with ExitStack() as stack:
        embedded_url = None
        if any(cfg.base_url is None for cfg in roles.values()):
            log_dir.mkdir(parents=True, exist_ok=True)
            embedded_url = stack.enter_context(
                embedded_server(config.embedded_threads, log_path=log_dir / "embedded-llm.log")
            )
            say(
                f"embedded model {EMBEDDED_MODEL_ALIAS} at {embedded_url}: structured output"
                f" {MODE_NAMES['json_object_schema']}, n: no, tool calls: no"
            )
        bound = {
            role: _bind(role, cfg, _embedded(embedded_url))
            for role, cfg in roles.items()
            if cfg.base_url is None
        }
        external = {role: cfg for role, cfg in roles.items() if cfg.base_url is not None}
        if external:
            with ThreadPoolExecutor(1) as thread:  # a loop of its own, whoever calls
                bound |= thread.submit(asyncio.run, _probe_all(external, say)).result()
        yield priced(bound, config)


class _Server(NamedTuple):
    """A model server and what it accepts: what every role on it shares."""

    base_url: str
    api_key: str
    model: str
    structured_output: StructuredMode
    supports_n: bool
    tool_calls: bool
    max_concurrency: int | None = None  # a limit of the server's own, over the roles'


def _embedded(url: str | None) -> _Server:
    """The embedded model: llama.cpp's server takes json_object with a schema, ignores `n`,
    returns no tool calls (unless `tool_choice` forces one) and serves one request at a time."""
    return _Server(
        base_url=url or "",
        api_key="embedded",
        model=EMBEDDED_MODEL_ALIAS,
        structured_output="json_object_schema",
        supports_n=False,
        tool_calls=False,
        max_concurrency=1,
    )


def _bind(role: str, cfg: EndpointConfig, server: _Server) -> Endpoint:
    """`role` on `server`, with the role's own settings from `cfg`."""
    return Endpoint(
        role=role,
        base_url=server.base_url,
        api_key=server.api_key,
        model=server.model,
        max_concurrency=server.max_concurrency or cfg.max_concurrency,
        timeout_s=cfg.timeout_s,
        max_retries=cfg.max_retries,
        structured_output=server.structured_output,
        supports_n=server.supports_n,
        tool_calls=server.tool_calls,
        temperature=cfg.temperature,
        seed=cfg.seed,
        price_input_per_mtok=cfg.price_input_per_mtok,
        price_output_per_mtok=cfg.price_output_per_mtok,
    )


async def _probe_all(
    roles: dict[str, EndpointConfig], say: Callable[[str], None]
) -> dict[str, Endpoint]:
    """Probe each distinct server and model once (concurrently) and bind every role to it."""
    distinct: dict[tuple, list[str]] = {}
    for role, cfg in roles.items():
        key = (
            cfg.base_url,
            cfg.api_key,
            cfg.model,
            cfg.json_schema,
            cfg.supports_n,
            cfg.tool_calls,
        )
        distinct.setdefault(key, []).append(role)
    probed = await asyncio.gather(
        *(_probe(names[0], roles[names[0]]) for names in distinct.values())
    )
    bound: dict[str, Endpoint] = {}
    for names, server in zip(distinct.values(), probed, strict=True):
        say(
            f"model server {server.base_url} ({', '.join(names)}): model {server.model},"
            f" structured output {MODE_NAMES[server.structured_output]},"
            f" n: {_yes(server.supports_n)}, tool calls: {_yes(server.tool_calls)}"
        )
        bound |= {role: _bind(role, roles[role], server) for role in names}
    return bound


async def _probe(role: str, cfg: EndpointConfig) -> _Server:
    """`role`'s server and what it accepts, or EndpointError."""
    assert cfg.base_url is not None
    where = _Settings(role, cfg)
    asked = _Server(
        base_url=cfg.base_url,
        api_key=cfg.api_key or "none",
        model=cfg.model or "",
        structured_output="json_object_schema" if cfg.json_schema is False else "json_schema",
        supports_n=bool(cfg.supports_n),
        tool_calls=bool(cfg.tool_calls),
    )
    first_contact = _bind(PROBE_ROLE, cfg, asked)  # the role's retries: a closed port is quick
    lister = LLMClient({PROBE_ROLE: first_contact}, cache=None)
    try:
        listed = await _asked(where, lambda: lister.list_models(PROBE_ROLE))
    finally:
        await lister.aclose()
    if not asked.model and not listed:
        raise EndpointError(f"{role}: {cfg.base_url} lists no models; name one with {where.model}")
    server = asked._replace(model=asked.model or listed[0])
    patient = replace(  # it answers: be patient
        _bind(PROBE_ROLE, cfg, server), max_retries=max(cfg.max_retries, PROBE_MIN_RETRIES)
    )
    client = LLMClient({PROBE_ROLE: patient}, cache=None)
    try:
        await _asked(
            where,
            lambda: client.structured_chat(PROBE_ROLE, PROBE_MESSAGES, _Probe, max_tokens=16),
            server.model,
            listed,
        )
        server = server._replace(structured_output=client.structured_mode(PROBE_ROLE))
    finally:
        await client.aclose()
    if cfg.supports_n is None:
        server = server._replace(supports_n=await _honours_n(patient, where))
    if cfg.tool_calls is None:
        server = server._replace(tool_calls=await _returns_tool_calls(patient, where))
    return server


async def _asked(
    where: _Settings,
    request: Callable[[], Awaitable[T]],
    model: str = "",
    listed: list[str] | None = None,
) -> T:
    """`request()`'s answer, asked up to PROBE_TRIES times while the server answers with an
    empty or unreadable reply (transient failures are retried within each request); any
    other failure, or the last one, is EndpointError."""
    for attempt in range(PROBE_TRIES):
        try:
            return await request()
        except LLMError as exc:
            if exc.reason not in CONTENT_FAULTS or attempt + 1 == PROBE_TRIES:
                raise where.unusable(exc, model, listed) from None
    raise AssertionError("unreachable: the last try returns or raises")


async def _honours_n(endpoint: Endpoint, where: _Settings) -> bool:
    """Whether one request with n=2 gets two choices back (a refusal of `n` or fewer choices:
    no, and k samples are k seeded requests)."""
    client = LLMClient({PROBE_ROLE: replace(endpoint, supports_n=True)}, cache=None)

    async def two() -> bool:
        try:
            await client.sample(
                PROBE_ROLE, PROBE_MESSAGES, 2, temperature=0.7, max_tokens=4, seed=0
            )
        except RefusedError:
            return False
        except LLMError as exc:
            if exc.reason == "wrong_sample_count":
                return False
            raise
        return True

    try:
        return await _asked(where, two, endpoint.model)
    finally:
        await client.aclose()


async def _returns_tool_calls(endpoint: Endpoint, where: _Settings) -> bool:
    """Whether a request offering one trivial tool, and asking for it, gets a call of that tool
    back (a refusal of `tools`, or a reply without the call: no, and world tasks are attempted
    with JSON actions). The choice is left to the model, as the world solver leaves it: llama.cpp's
    server makes a call when `tool_choice` names a tool, and never otherwise."""
    client = LLMClient({PROBE_ROLE: endpoint}, cache=None)

    async def called() -> bool:
        try:
            reply = await client.chat(
                PROBE_ROLE,
                PROBE_TOOL_MESSAGES,
                temperature=0.0,
                max_tokens=PROBE_TOOL_MAX_TOKENS,
                seed=0,
                tools=[PROBE_TOOL],
            )
        except RefusedError:
            return False
        except LLMError as exc:
            if exc.reason == "empty_response":  # neither text nor a call: no call
                return False
            raise
        return any(call.name == PROBE_TOOL_NAME for call in reply.tool_calls)

    try:
        return await _asked(where, called, endpoint.model)
    finally:
        await client.aclose()


class _Settings:
    """Names the settings behind one role's endpoint, for messages that say what to change."""

    def __init__(self, role: str, cfg: EndpointConfig) -> None:
        self.role, self.cfg = role, cfg
        section = (
            f"[[roles.judges]] #{int(role.split(':')[1]) + 1}"
            if role.startswith("judge:")
            else f"[roles.{role}]"
        )
        from_env = os.environ.get("OPENAI_BASE_URL") == cfg.base_url
        self.base_url = "OPENAI_BASE_URL" if from_env else f"{section} base_url"
        self.api_key = "OPENAI_API_KEY" if from_env else f"{section} api_key"
        self.model = "FOUNDRY_MODEL" if from_env else f"{section} model"

    def unusable(self, exc: LLMError, model: str = "", listed: list[str] | None = None):
        """The EndpointError for a probe that failed with `exc`."""
        url, role = self.cfg.base_url, self.role
        if isinstance(exc, RefusedError) and exc.status in (401, 403):
            return EndpointError(
                f"{role}: {url} refused the API key (HTTP {exc.status}); set {self.api_key}"
            )
        if isinstance(exc, RefusedError) and exc.status in (400, 404) and _about_model(exc):
            serves = f" (it serves {', '.join(listed)})" if listed else ""
            return EndpointError(
                f"{role}: {url} does not serve model {model!r}{serves}; set {self.model}"
            )
        if exc.reason in ("connection_error", "timeout"):
            return EndpointError(
                f"{role}: cannot reach the model server at {url} ({exc.reason}:"
                f" {_first_line(exc.detail)}); start it or set {self.base_url}"
            )
        return EndpointError(
            f"{role}: the model server at {url} failed a probe request ({exc.reason}:"
            f" {_first_line(exc.detail)}); check it or set {self.base_url}"
        )


def _about_model(exc: RefusedError) -> bool:
    return exc.status == 404 or "model" in exc.detail.lower()


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:160]
