"""The LLM client: the only module that talks to model servers (and the only importer of openai).

- roles (`generator`, `judge:N`, `solver`) map to endpoints; each server has a bounded
  number of requests in flight, counted across every client of the process;
- transient failures (timeouts, connection resets, 408/409/429/5xx) are retried by the openai
  SDK with exponential backoff that honours Retry-After; anything else fails at once;
- structured output is validated against a pydantic model, with a bounded repair retry;
- every successful response is cached by the full request, so an identical re-run makes no
  calls; every request (cache hits included) leaves an `LLMCall` usage record.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import ssl
import time
import uuid
from collections.abc import Awaitable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple, NoReturn, TypeVar

import httpx2
import openai
from pydantic import BaseModel, ValidationError

from data.budget import Budget
from data.endpoints import Endpoint
from data.errors import ReasonedError
from data.llm_cache import ResponseCache, request_key
from data.records import LLMCall, Usage, utcnow
from data.server_limit import ServerLimit, server_limit

T = TypeVar("T", bound=BaseModel)
REPAIR_OPENING = "That reply is not valid"  # how an invalid structured reply is answered
T_co = TypeVar("T_co")
Messages = list[dict[str, Any]]


class LLMError(ReasonedError):
    """A request that failed for good; `reason` is short and stable (used in the funnel)."""


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call a model asked for (OpenAI tools API): its id, the tool, and the arguments
    as the JSON text the model wrote (not parsed: that may fail, and the caller says so)."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Reply:
    text: str
    usage: Usage
    cached: bool
    key: str = ""  # the cache key of the request that produced it
    rollout_id: str = ""  # the X-Rollout-Id the request carried, if any
    tool_calls: tuple[ToolCallRequest, ...] = ()  # with `tools`: the calls the model asked for


class Completion(NamedTuple):
    """One request's outcome: each choice's text and tool calls, usage, cache hit, cache key."""

    texts: list[str]
    usage: Usage
    cached: bool
    key: str
    tool_calls: list[list[ToolCallRequest]]


class LLMClient:
    """Async client over the resolved endpoints; create it inside the event loop that uses it."""

    def __init__(
        self,
        endpoints: dict[str, Endpoint],
        cache: ResponseCache | None,
        run_id: str = "",
        budget: Budget | None = None,
    ) -> None:
        self.endpoints = endpoints
        self.cache = cache
        self.run_id = run_id
        self.budget = budget  # refuses live requests once spent
        self.calls: list[LLMCall] = []
        self._clients: dict[tuple[str, str, float, int], openai.AsyncOpenAI] = {}
        self._limits: dict[str, ServerLimit] = {}

    @property
    def judge_roles(self) -> list[str]:
        return sorted((r for r in self.endpoints if r.startswith("judge:")), key=_judge_index)

    def model(self, role: str) -> str:
        return self._endpoint(role).model

    def drain_calls(self) -> list[LLMCall]:
        """Usage records collected since the last drain."""
        calls, self.calls = self.calls, []
        return calls

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    # --- requests ------------------------------------------------------------------------

    async def chat(
        self,
        role: str,
        messages: Messages,
        *,
        temperature: float | None = None,
        max_tokens: int = 256,
        seed: int | None = None,
        response_format: dict[str, Any] | None = None,
        rollout_id: str = "",
        tools: list[dict[str, Any]] | None = None,
    ) -> Reply:
        """One completion; raises LLMError when the request fails for good or the reply is empty
        (an empty reply is an error, retried by a later run, never a silent wrong answer).
        Temperature and seed default to the role's endpoint settings; `rollout_id` is sent as the
        X-Rollout-Id header (for the interception proxy) and is not part of the cache key.
        With `tools` (the OpenAI tools format) the reply may be tool calls instead of text."""
        endpoint = self._endpoint(role)
        temperature = endpoint.temperature if temperature is None else temperature
        seed = endpoint.seed if seed is None else seed
        params: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
        if seed is not None:
            params["seed"] = seed
        if response_format is not None:
            params["response_format"] = response_format
        if tools:
            params["tools"] = tools
        done = await self._request(role, messages, params, rollout_id)
        return Reply(
            done.texts[0], done.usage, done.cached, done.key, rollout_id, tuple(done.tool_calls[0])
        )

    async def sample(
        self,
        role: str,
        messages: Messages,
        n: int,
        *,
        temperature: float,
        max_tokens: int,
        seed: int,
        rollout_ids: list[str] | None = None,
    ) -> list[Reply]:
        """`n` samples: one request with `n` where the backend supports it, else `n` seeded ones.
        `rollout_ids` names each sample's rollout (one request with `n` carries the first)."""
        endpoint = self._endpoint(role)
        rollouts = rollout_ids or [""] * n
        if endpoint.supports_n and n > 1:
            params = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed, "n": n}
            texts, usage, cached, _, _ = await self._request(role, messages, params, rollouts[0])
            if len(texts) != n:
                raise LLMError(
                    "wrong_sample_count",
                    f"asked for n={n}, got {len(texts)}: set supports_n = false for this endpoint",
                )
            share = Usage(
                prompt_tokens=usage.prompt_tokens // n,
                completion_tokens=usage.completion_tokens // n,
            )
            return [Reply(text, share, cached, rollout_id=rollouts[0]) for text in texts]
        calls = [
            self.chat(
                role,
                messages,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed + i,
                rollout_id=rollouts[i],
            )
            for i in range(n)
        ]
        return await settle(calls)

    async def structured(
        self,
        role: str,
        messages: Messages,
        schema: type[T],
        *,
        temperature: float | None = None,
        max_tokens: int = 256,
        seed: int | None = None,
        repairs: int = 2,
    ) -> T:
        """A reply parsed into `schema`; invalid replies are shown the error and asked again."""
        response_format = self.response_format(role, schema)
        conversation = list(messages)
        error = ""
        for _ in range(repairs + 1):
            reply = await self.chat(
                role,
                conversation,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed,
                response_format=response_format,
            )
            try:
                # strict=False: raw newlines inside strings are a common, harmless model quirk
                return schema.model_validate(json.loads(reply.text, strict=False))
            except json.JSONDecodeError as exc:
                error = f"invalid JSON: {exc.msg} at char {exc.pos}"
            except ValidationError as exc:
                error = _short_validation_error(exc)
            if self.cache and reply.key:
                await asyncio.to_thread(self.cache.forget, reply.key)  # never replay garbage
            conversation = [
                *conversation,
                {"role": "assistant", "content": reply.text},
                {
                    "role": "user",
                    "content": (
                        f"{REPAIR_OPENING}: {error}. Reply again with only a JSON object"
                        f" that matches this schema: {json.dumps(_json_schema(schema))}"
                    ),
                },
            ]
        raise LLMError("invalid_structured_output", error)

    # --- internals -----------------------------------------------------------------------

    def _endpoint(self, role: str) -> Endpoint:
        try:
            return self.endpoints[role]
        except KeyError:
            raise LLMError("unknown_role", role) from None

    def response_format(self, role: str, schema: type[BaseModel]) -> dict[str, Any]:
        """The `response_format` asking `role`'s server for JSON that matches `schema`."""
        json_schema = copy.deepcopy(_json_schema(schema))
        if self._endpoint(role).json_schema:
            json_schema["additionalProperties"] = False  # strict mode requires it
            return {
                "type": "json_schema",
                "json_schema": {"name": schema.__name__, "schema": json_schema, "strict": True},
            }
        return {"type": "json_object", "schema": json_schema}

    def _client(self, endpoint: Endpoint) -> openai.AsyncOpenAI:
        key = (
            endpoint.base_url,
            endpoint.api_key,
            endpoint.timeout_s,
            endpoint.max_retries,
            endpoint.headers,
        )
        if key not in self._clients:
            self._clients[key] = openai.AsyncOpenAI(
                base_url=endpoint.base_url,
                api_key=endpoint.api_key,
                max_retries=endpoint.max_retries,
                timeout=endpoint.timeout_s,
                default_headers=dict(endpoint.headers) or None,
                http_client=openai.DefaultAsyncHttpxClient(verify=_tls_context()),
            )
        return self._clients[key]

    def _limit(self, endpoint: Endpoint) -> ServerLimit:
        """One limit per server, shared by every role on it (the smallest any of them allows,
        a proxy in between or not) and by every client in the process."""
        server = endpoint.server
        if server not in self._limits:
            allowed = min(e.max_concurrency for e in self.endpoints.values() if e.server == server)
            self._limits[server] = server_limit(server, allowed)
        return self._limits[server]

    async def _request(
        self, role: str, messages: Messages, params: dict[str, Any], rollout_id: str = ""
    ) -> Completion:
        """One request, from the cache where it was made before."""
        endpoint = self._endpoint(role)
        request = {"model": endpoint.model, "messages": messages, **params}
        key = request_key(request)
        hit = await asyncio.to_thread(self.cache.get, key) if self.cache else None
        if hit is not None:
            usage = Usage(**hit["usage"])
            self._record(endpoint, usage, 0.0, cached=True, error="")
            calls = hit.get("tool_calls") or [[] for _ in hit["texts"]]  # older entries: none
            tool_calls = [[ToolCallRequest(**call) for call in choice] for choice in calls]
            return Completion(hit["texts"], usage, True, key, tool_calls)
        if self.budget is not None and self.budget.exhausted:
            raise LLMError("budget_exhausted", self.budget.describe())
        started = time.monotonic()
        try:
            async with self._limit(endpoint):
                started = time.monotonic()  # latency excludes waiting for a free slot
                headers = {"X-Rollout-Id": rollout_id} if rollout_id else None
                response = await self._client(endpoint).chat.completions.create(
                    **request, extra_headers=headers
                )
        except openai.APIStatusError as exc:
            self._fail(endpoint, started, f"http_{exc.status_code}", str(exc))
        except openai.APITimeoutError as exc:
            self._fail(endpoint, started, "timeout", str(exc))
        except openai.APIConnectionError as exc:
            self._fail(endpoint, started, "connection_error", str(exc))
        except openai.APIError as exc:
            self._fail(endpoint, started, "bad_response", str(exc))
        except ValueError as exc:  # a 200 whose body is not JSON at all
            self._fail(endpoint, started, "bad_response", str(exc))
        if not isinstance(response, openai.types.chat.ChatCompletion):  # e.g. an HTML page
            self._fail(endpoint, started, "bad_response", f"not a completion: {str(response)[:80]}")
        latency = time.monotonic() - started
        choices = response.choices or []
        texts = [(choice.message.content or "") for choice in choices]
        tool_calls = [
            [
                ToolCallRequest(call.id, call.function.name, call.function.arguments or "")
                for call in (choice.message.tool_calls or [])
                if call.type == "function"
            ]
            for choice in choices
        ]
        empty = [not t.strip() and not c for t, c in zip(texts, tool_calls, strict=True)]
        if not texts or any(empty):
            self._fail(endpoint, started, "empty_response", f"{len(texts)} choices")
        usage = Usage(
            prompt_tokens=getattr(response.usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(response.usage, "completion_tokens", 0) or 0,
        )
        if self.cache:
            payload = {
                "texts": texts,
                "tool_calls": [[asdict(call) for call in choice] for choice in tool_calls],
                "usage": usage.model_dump(),
            }
            await asyncio.to_thread(self.cache.put, key, payload)
        self._record(endpoint, usage, latency, cached=False, error="")
        return Completion(texts, usage, False, key, tool_calls)

    def _fail(self, endpoint: Endpoint, started: float, reason: str, detail: str) -> NoReturn:
        self._record(endpoint, Usage(), time.monotonic() - started, cached=False, error=reason)
        raise LLMError(reason, detail[:300])

    def _record(
        self, endpoint: Endpoint, usage: Usage, latency: float, *, cached: bool, error: str
    ) -> None:
        cost = 0.0 if cached else endpoint.cost(usage.prompt_tokens, usage.completion_tokens)
        if self.budget is not None and not cached:
            self.budget.charge(usage.prompt_tokens + usage.completion_tokens, cost)
        self.calls.append(
            LLMCall(
                call_id=uuid.uuid4().hex,
                run_id=self.run_id,
                role=endpoint.role,
                model=endpoint.model,
                cached=cached,
                ok=not error,
                error=error,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                latency_s=latency,
                cost_usd=cost,
                recorded_at=utcnow(),
            )
        )


async def settle(coroutines: list[Awaitable[T_co]]) -> list[T_co]:
    """Await all; if any raised, re-raise the first error only after every one has finished,
    so no request is left running against a closed client and every usage record is kept."""
    results = await asyncio.gather(*coroutines, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return list(results)


def _judge_index(role: str) -> int:
    return int(role.split(":", 1)[1])


def _short_validation_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "reply"
    return f"{where}: {first.get('msg', 'invalid')}"[:200]


@functools.cache
def _json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """`schema`'s JSON schema, made once per class (pydantic takes about 0.5 ms a time); callers
    copy it before changing it."""
    return schema.model_json_schema()


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The TLS settings every model client shares, made with httpx2's defaults as a client
    makes its own: loading the CAs took 22 of a client's 25 ms, and every batch makes a client
    per server."""
    return httpx2.create_ssl_context()
