"""The LLM client: the only module that talks to model servers (and the only importer of openai).

- roles (`generator`, `judge:N`, `solver`) map to endpoints; each server has a bounded
  number of requests in flight, counted across every client of the process;
- transient failures (timeouts, connection resets, 408/409/429/5xx) are retried with exponential
  backoff that honours Retry-After; anything else fails at once, and so does a 5xx whose message
  says the server refused the request itself (llama.cpp answers 500 to a `response_format` it
  does not take): a refusal is never retried as if it were transient;
- structured output is validated against a pydantic model, with a bounded repair retry; a server
  that refuses one `response_format` is asked in the next one down (`STRUCTURED_MODES`), and the
  whole process remembers;
- every successful response is cached by the full request, so an identical re-run makes no
  calls; every request (cache hits included) leaves an `LLMCall` usage record.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import time
import uuid
from collections.abc import Awaitable
from contextvars import ContextVar
from dataclasses import asdict
from typing import Any, NoReturn, TypeVar

import httpx2
import openai
from pydantic import BaseModel, ValidationError

from data.costs import CHARS_PER_TOKEN, Budget
from data.lake import LLMCall, Usage, utcnow
from data.llm.cache import ResponseCache, request_key
from data.llm.endpoints import Endpoint, StructuredMode
from data.llm.failures import (
    FORMAT_REFUSAL,
    backoff_s,
    failure_reason,
    is_transient,
    retry_after,
    server_message,
)
from data.llm.replies import Completion, Reply, ToolCallRequest
from data.llm.server_limit import ServerLimit, server_limit
from data.llm.structured import (
    LEARNED_MODES,
    Messages,
    format_for,
    schema_of,
    short_validation_error,
    with_schema_instruction,
)
from data.runtime.errors import ReasonedError

T = TypeVar("T", bound=BaseModel)
REPAIR_OPENING = "That reply is not valid"  # how an invalid structured reply is answered
T_co = TypeVar("T_co")


class LLMError(ReasonedError):
    """A request that failed for good; `reason` is short and stable (used in the funnel)."""


class RefusedError(LLMError):
    """The server refused the request itself (a 4xx, or a 5xx saying so): asking again the same
    way fails again. `status` is the HTTP status, `detail` the server's message."""

    def __init__(self, status: int, detail: str, latency_s: float = 0.0) -> None:
        super().__init__(f"http_{status}", detail)
        self.status = status
        self.latency_s = latency_s

    @property
    def names_format(self) -> bool:
        """Whether the refusal is about the request's `response_format`."""
        return self.status in (400, 422, 500, 501) and bool(FORMAT_REFUSAL.search(self.detail))


# The stage item a request is made for, recorded with its call: set by the stage runner in the
# asyncio task that works on the item (each task has its own copy of the context).
CURRENT_ITEM: ContextVar[str] = ContextVar("foundry_llm_item", default="")


class LLMClient:
    """Async client over the resolved endpoints; create it inside the event loop that uses it."""

    def __init__(
        self,
        endpoints: dict[str, Endpoint],
        cache: ResponseCache | None,
        run_id: str = "",
        budget: Budget | None = None,
        stage: str = "",
    ) -> None:
        self.endpoints = endpoints
        self.cache = cache
        self.run_id = run_id
        self.budget = budget  # refuses live requests once spent
        self.stage = stage  # recorded with each call
        self.calls: list[LLMCall] = []
        self._clients: dict[tuple[str, str, float, int], openai.AsyncOpenAI] = {}
        self._limits: dict[str, ServerLimit] = {}

    @property
    def judge_roles(self) -> list[str]:
        return sorted((r for r in self.endpoints if r.startswith("judge:")), key=_judge_index)

    def model(self, role: str) -> str:
        return self.endpoint(role).model

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
        endpoint = self.endpoint(role)
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
        endpoint = self.endpoint(role)
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
        """A reply parsed into `schema`; invalid replies are shown the error and asked again.
        A server that refuses the `response_format` is asked again in the next mode down."""
        conversation = list(messages)
        error = ""
        for _ in range(repairs + 1):
            reply = await self.structured_chat(
                role,
                conversation,
                schema,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed,
            )
            try:
                # strict=False: raw newlines inside strings are a common, harmless model quirk
                return schema.model_validate(json.loads(reply.text, strict=False))
            except json.JSONDecodeError as exc:
                error = f"invalid JSON: {exc.msg} at char {exc.pos}"
            except ValidationError as exc:
                error = short_validation_error(exc)
            if self.cache and reply.key:
                await asyncio.to_thread(self.cache.forget, reply.key)  # never replay garbage
            conversation = [
                *conversation,
                {"role": "assistant", "content": reply.text},
                {
                    "role": "user",
                    "content": (
                        f"{REPAIR_OPENING}: {error}. Reply again with only a JSON object"
                        f" that matches this schema: {json.dumps(schema_of(schema))}"
                    ),
                },
            ]
        raise LLMError("invalid_structured_output", error)

    async def list_models(self, role: str) -> list[str]:
        """The model ids `role`'s server lists at `/models` (empty when it has no such route)."""
        endpoint = self.endpoint(role)
        try:
            page, _ = await self._send(endpoint, lambda: self._client(endpoint).models.list())
        except RefusedError as exc:
            if exc.status == 404:
                return []
            raise
        except (openai.APIError, ValueError) as exc:
            raise LLMError(failure_reason(exc), str(exc)[:300]) from None
        return [model.id for model in page.data or []]

    def structured_mode(self, role: str) -> StructuredMode:
        """How structured replies are asked of `role`'s server now (after any refusal)."""
        return LEARNED_MODES.current(self.endpoint(role))

    async def structured_chat(
        self,
        role: str,
        messages: Messages,
        schema: type[BaseModel],
        *,
        temperature: float | None = None,
        max_tokens: int = 256,
        seed: int | None = None,
        rollout_id: str = "",
    ) -> Reply:
        """One request for JSON matching `schema` (not parsed), in the server's structured
        mode; a refusal of that mode moves down to the next one and asks again."""
        endpoint = self.endpoint(role)
        while True:
            mode = LEARNED_MODES.current(endpoint)
            sent = with_schema_instruction(messages, schema) if mode == "prompt" else messages
            try:
                return await self.chat(
                    role,
                    sent,
                    temperature=temperature,
                    max_tokens=max_tokens,
                    seed=seed,
                    response_format=format_for(mode, schema),
                    rollout_id=rollout_id,
                )
            except RefusedError as exc:
                if not exc.names_format or not LEARNED_MODES.step_down(endpoint, mode, exc.detail):
                    raise

    # --- internals -----------------------------------------------------------------------

    def endpoint(self, role: str) -> Endpoint:
        """The endpoint `role` is bound to (its server's capabilities included)."""
        try:
            return self.endpoints[role]
        except KeyError:
            raise LLMError("unknown_role", role) from None

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
                max_retries=0,  # retried by `_send`, which knows a refusal from a fault
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
        endpoint = self.endpoint(role)
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
        call_id = uuid.uuid4().hex
        if self.budget is not None:  # written ahead: a crash from here on loses no spend
            self.budget.sent(call_id, endpoint.role, endpoint.model, _bound_usd(endpoint, request))
        started = time.monotonic()
        headers = {"X-Rollout-Id": rollout_id} if rollout_id else None

        def create() -> Awaitable[Any]:
            return self._client(endpoint).chat.completions.create(**request, extra_headers=headers)

        try:
            response, started = await self._send(endpoint, create)
        except RefusedError as exc:
            latency, reason = exc.latency_s, exc.reason
            self._record(endpoint, Usage(), latency, cached=False, error=reason, call_id=call_id)
            raise
        except (openai.APIError, ValueError) as exc:  # ValueError: a 200 that is not JSON
            self._fail(endpoint, started, failure_reason(exc), str(exc), call_id)
        if not isinstance(response, openai.types.chat.ChatCompletion):  # e.g. an HTML page
            detail = f"not a completion: {str(response)[:80]}"
            self._fail(endpoint, started, "bad_response", detail, call_id)
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
            self._fail(endpoint, started, "empty_response", f"{len(texts)} choices", call_id)
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
        self._record(endpoint, usage, latency, cached=False, error="", call_id=call_id)
        return Completion(texts, usage, False, key, tool_calls)

    async def _send(self, endpoint: Endpoint, call: Any) -> tuple[Any, float]:
        """`call()` under the server's request limit, tried again after transient failures
        (up to `max_retries` times, after Retry-After or a jittered exponential backoff, with
        the slot released while waiting); a refusal raises RefusedError at once. Returns the
        result and when its attempt got its slot (latency excludes waiting for one)."""
        for attempt in range(endpoint.max_retries + 1):
            last = attempt == endpoint.max_retries
            started = time.monotonic()
            try:
                async with self._limit(endpoint):
                    started = time.monotonic()
                    return await call(), started
            except openai.APIStatusError as exc:
                if not is_transient(exc):
                    latency = time.monotonic() - started
                    raise RefusedError(exc.status_code, server_message(exc), latency) from None
                if last:
                    raise
                delay = retry_after(exc.response) or backoff_s(attempt)
            except openai.APIConnectionError:  # timeouts included
                if last:
                    raise
                delay = backoff_s(attempt)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _fail(
        self, endpoint: Endpoint, started: float, reason: str, detail: str, call_id: str
    ) -> NoReturn:
        latency = time.monotonic() - started
        self._record(endpoint, Usage(), latency, cached=False, error=reason, call_id=call_id)
        raise LLMError(reason, detail[:300])

    def _record(
        self,
        endpoint: Endpoint,
        usage: Usage,
        latency: float,
        *,
        cached: bool,
        error: str,
        call_id: str = "",
    ) -> None:
        """Keep the call's usage, and charge a live one to the budget (settling its ledger
        line where it has one: `call_id`)."""
        call_id = call_id or uuid.uuid4().hex
        cost = 0.0 if cached else endpoint.cost(usage.prompt_tokens, usage.completion_tokens)
        if self.budget is not None and not cached:
            tokens = usage.prompt_tokens + usage.completion_tokens
            self.budget.charge(tokens, cost, call_id, error, endpoint.model)
        self.calls.append(
            LLMCall(
                call_id=call_id,
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
                stage=self.stage,
                item=CURRENT_ITEM.get(),
            )
        )


def _bound_usd(endpoint: Endpoint, request: dict[str, Any]) -> float | None:
    """The most a request can cost: its prompt at four characters a token, and its
    `max_tokens` (1,024 where it sets none); None where its model has no price."""
    prompt = len(json.dumps(request["messages"], default=str)) // CHARS_PER_TOKEN
    return endpoint.cost(prompt, int(request.get("max_tokens") or 1024) * request.get("n", 1))


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


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The TLS settings every model client shares, made with httpx2's defaults as a client
    makes its own: loading the CAs took 22 of a client's 25 ms, and every batch makes a client
    per server."""
    return httpx2.create_ssl_context()
