"""LLMClient against the fake OpenAI server: retries, timeouts, repair, cache, sampling, limits."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from data.lake import LLMCall
from data.llm import Endpoint, LLMClient, LLMError, ResponseCache
from tests.fakes.openai_server import MALFORMED_CONTENT, FakeOpenAIServer, PeakInFlight

MESSAGES = [
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "What is the capital of France?"},
]


class Answer(BaseModel):
    answer: str


@dataclass
class Outcome:
    """What one client session produced: its value or its LLMError, and its usage records."""

    value: Any = None
    error: LLMError | None = None
    calls: list[LLMCall] = field(default_factory=list)


def endpoint_for(server: FakeOpenAIServer, **overrides: Any) -> Endpoint:
    fields: dict[str, Any] = {
        "role": "generator",
        "base_url": server.base_url,
        "api_key": "k",
        "model": "fake-model",
        "max_concurrency": 4,
        "timeout_s": 5.0,
        "max_retries": 2,
        "structured_output": "json_schema",
        "supports_n": False,
    }
    fields.update(overrides)
    return Endpoint(**fields)


def drive(
    endpoint: Endpoint, cache: ResponseCache | None, use: Callable[[LLMClient], Awaitable[Any]]
) -> Outcome:
    """Run `use` with a fresh LLMClient created inside its own event loop."""

    async def main() -> Outcome:
        client = LLMClient({endpoint.role: endpoint}, cache, run_id="run-1")
        outcome = Outcome()
        try:
            outcome.value = await use(client)
        except LLMError as exc:
            outcome.error = exc
        finally:
            await client.aclose()
        outcome.calls = client.drain_calls()
        return outcome

    return asyncio.run(main())


def ask(**kwargs: Any) -> Callable[[LLMClient], Awaitable[Any]]:
    async def use(client: LLMClient) -> Any:
        return await client.chat("generator", MESSAGES, **kwargs)

    return use


def structured(**kwargs: Any) -> Callable[[LLMClient], Awaitable[Any]]:
    async def use(client: LLMClient) -> Any:
        return await client.structured("generator", MESSAGES, Answer, **kwargs)

    return use


def sample(n: int, seed: int) -> Callable[[LLMClient], Awaitable[Any]]:
    async def use(client: LLMClient) -> Any:
        return await client.sample(
            "generator", MESSAGES, n, temperature=0.8, max_tokens=16, seed=seed
        )

    return use


def cache_entries(cache: ResponseCache) -> list[Path]:
    return sorted(cache.root.rglob("*.json")) if cache.root.exists() else []


@pytest.fixture
def cache(tmp_path: Path) -> ResponseCache:
    return ResponseCache(tmp_path / "cache")


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(lambda body: "Paris") as fake:
        yield fake


# --- plain requests and transient failures ---------------------------------------------------


def test_chat_success_records_usage(server: FakeOpenAIServer, cache: ResponseCache) -> None:
    out = drive(endpoint_for(server), cache, ask(temperature=0.3, max_tokens=20, seed=5))

    assert out.error is None
    assert out.value.text == "Paris" and out.value.cached is False
    assert out.value.usage.prompt_tokens == 9  # words in the messages
    assert out.value.usage.completion_tokens == 1
    (body,) = server.requests
    assert body["model"] == "fake-model" and body["messages"] == MESSAGES
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.3, 20, 5)
    (call,) = out.calls
    assert (call.run_id, call.role, call.model) == ("run-1", "generator", "fake-model")
    assert call.ok and not call.cached and call.error == ""
    assert (call.prompt_tokens, call.completion_tokens) == (9, 1)
    assert call.latency_s > 0
    assert len(cache_entries(cache)) == 1


def test_cost_uses_endpoint_prices(server: FakeOpenAIServer) -> None:
    endpoint = endpoint_for(server, price_input_per_mtok=1e6, price_output_per_mtok=2e6)
    out = drive(endpoint, None, ask())

    assert out.calls[0].cost_usd == pytest.approx(9 * 1 + 1 * 2)


def test_429_honours_retry_after(cache: ResponseCache) -> None:
    with FakeOpenAIServer(faults=["429"], retry_after_s=1.0) as fake:
        out = drive(endpoint_for(fake, max_retries=2), cache, ask())

    assert out.error is None and out.value.text == "ok"
    assert len(fake.requests) == 2
    waited = fake.request_times[1] - fake.request_times[0]
    assert waited >= 0.9 * fake.retry_after_s


def test_500_then_success(cache: ResponseCache) -> None:
    with FakeOpenAIServer(faults=["500"]) as fake:
        out = drive(endpoint_for(fake, max_retries=2), cache, ask())

    assert out.error is None and out.value.text == "ok"
    assert fake.served == ["500", None]
    assert [c.ok for c in out.calls] == [True]


def test_503_exhausting_retries_fails_without_caching(cache: ResponseCache) -> None:
    with FakeOpenAIServer(faults=["503"] * 5) as fake:
        out = drive(endpoint_for(fake, max_retries=1), cache, ask())

    assert out.error is not None and out.error.reason == "http_503"
    assert len(fake.requests) == 2  # the first try and one retry
    assert cache_entries(cache) == []
    (call,) = out.calls
    assert not call.ok and call.error == "http_503" and call.cost_usd == 0


def test_hang_once_is_retried_after_timeout(cache: ResponseCache) -> None:
    with FakeOpenAIServer(faults=["hang"], hang_s=5.0) as fake:
        out = drive(endpoint_for(fake, timeout_s=0.5, max_retries=1), cache, ask())

    assert out.error is None and out.value.text == "ok"
    assert fake.served == ["hang", None]


def test_hang_without_retries_is_a_timeout(cache: ResponseCache) -> None:
    with FakeOpenAIServer(faults=["hang"], hang_s=5.0) as fake:
        started = time.monotonic()
        out = drive(endpoint_for(fake, timeout_s=0.5, max_retries=0), cache, ask())
        elapsed = time.monotonic() - started

    assert out.error is not None and out.error.reason == "timeout"
    assert len(fake.requests) == 1
    assert elapsed < 4.0  # gave up at the timeout, not when the server answered
    assert cache_entries(cache) == []


def test_connection_reset_is_retried(cache: ResponseCache) -> None:
    with FakeOpenAIServer(faults=["reset"]) as fake:
        out = drive(endpoint_for(fake, max_retries=2), cache, ask())

    assert out.error is None and out.value.text == "ok"
    assert fake.served == ["reset", None]


def test_connection_reset_without_retries_is_a_connection_error(cache: ResponseCache) -> None:
    with FakeOpenAIServer(faults=["reset"]) as fake:
        out = drive(endpoint_for(fake, max_retries=0), cache, ask())

    assert out.error is not None and out.error.reason == "connection_error"


def test_empty_content_is_an_error_and_not_cached(cache: ResponseCache) -> None:
    with FakeOpenAIServer(faults=["empty"]) as fake:
        out = drive(endpoint_for(fake), cache, ask())

    assert out.error is not None and out.error.reason == "empty_response"
    assert len(fake.requests) == 1
    assert cache_entries(cache) == []


def test_garbage_body_is_a_bad_response(cache: ResponseCache) -> None:
    with FakeOpenAIServer(faults=["garbage_body"]) as fake:
        out = drive(endpoint_for(fake, max_retries=0), cache, ask())

    assert out.error is not None and out.error.reason == "bad_response"
    assert cache_entries(cache) == []


def test_roles_sharing_a_server_keep_their_own_timeouts() -> None:
    with FakeOpenAIServer(faults=["hang", "hang"], hang_s=1.0) as fake:
        fast = endpoint_for(fake, role="generator", timeout_s=0.3, max_retries=0)
        patient = endpoint_for(fake, role="solver", timeout_s=5.0, max_retries=0)

        async def both() -> dict[str, str]:
            client = LLMClient({"generator": fast, "solver": patient}, None)
            outcomes = {}
            try:
                for role in ("generator", "solver"):
                    try:
                        outcomes[role] = (await client.chat(role, MESSAGES)).text
                    except LLMError as exc:
                        outcomes[role] = exc.reason
            finally:
                await client.aclose()
            return outcomes

        outcomes = asyncio.run(both())

    assert outcomes == {"generator": "timeout", "solver": "ok"}


# --- structured output -----------------------------------------------------------------------


def test_structured_repairs_malformed_json(cache: ResponseCache) -> None:
    with FakeOpenAIServer(lambda body: '{"answer": "Paris"}', faults=["malformed"]) as fake:
        out = drive(endpoint_for(fake), cache, structured())

    assert out.error is None and out.value == Answer(answer="Paris")
    assert len(fake.requests) == 2
    repair = fake.requests[1]["messages"]
    assert repair[: len(MESSAGES)] == MESSAGES
    assert repair[-2] == {"role": "assistant", "content": MALFORMED_CONTENT}
    assert repair[-1]["role"] == "user" and "not valid" in repair[-1]["content"]
    assert '"answer"' in repair[-1]["content"]  # the schema is shown again


def test_structured_gives_up_after_repairs(cache: ResponseCache) -> None:
    with FakeOpenAIServer(lambda body: "Paris, I think") as fake:
        out = drive(endpoint_for(fake), cache, structured(repairs=2))

    assert out.error is not None and out.error.reason == "invalid_structured_output"
    assert len(fake.requests) == 3
    assert [len(r["messages"]) for r in fake.requests] == [2, 4, 6]
    assert cache_entries(cache) == []  # unusable replies are never replayed from the cache


def test_one_failing_sample_fails_the_set_after_the_others_finish(cache: ResponseCache) -> None:
    def respond(body: dict[str, Any]) -> str:
        if body.get("seed") == 12:
            return ""
        time.sleep(0.2)
        return "Paris"

    with FakeOpenAIServer(respond) as fake:
        out = drive(endpoint_for(fake), cache, sample(4, seed=10))

    assert out.error is not None and out.error.reason == "empty_response"
    assert len(out.calls) == 4  # every request finished and left its usage record


@pytest.mark.parametrize("mode", ["json_schema", "json_object_schema"])
def test_response_format_follows_endpoint(cache: ResponseCache, mode: str) -> None:
    with FakeOpenAIServer(lambda body: '{"answer": "Paris"}') as fake:
        out = drive(endpoint_for(fake, structured_output=mode), cache, structured())

    assert out.value == Answer(answer="Paris")
    sent = fake.requests[0]["response_format"]
    schema = Answer.model_json_schema()
    if mode == "json_schema":
        strict = {**schema, "additionalProperties": False}  # required by strict mode
        assert sent == {
            "type": "json_schema",
            "json_schema": {"name": "Answer", "schema": strict, "strict": True},
        }
    else:
        assert sent == {"type": "json_object", "schema": schema}


def test_a_refused_format_is_not_retried_and_steps_down_for_the_process(
    cache: ResponseCache,
) -> None:
    """llama.cpp's server answers a json_schema response_format with HTTP 500 "Input should be
    'text' or 'json_object'": asked once, never retried, then as json_object with the schema;
    the next client in the process asks that way from the start."""
    with FakeOpenAIServer(lambda body: '{"answer": "Paris"}', llama_cpp=True) as fake:
        first = drive(endpoint_for(fake, max_retries=3), cache, structured())
        second = drive(endpoint_for(fake, max_retries=3), None, structured(seed=9))

    assert first.value == second.value == Answer(answer="Paris")
    assert fake.served == ["refused", None, None]
    assert [r["response_format"]["type"] for r in fake.requests] == [
        "json_schema",
        "json_object",
        "json_object",
    ]
    assert "schema" in fake.requests[1]["response_format"]
    assert [c.error for c in first.calls] == ["http_500", ""]


def test_a_server_taking_no_format_gets_the_schema_in_the_prompt(cache: ResponseCache) -> None:
    with FakeOpenAIServer(lambda body: '{"answer": "Paris"}', formats=["text"]) as fake:
        out = drive(endpoint_for(fake, max_retries=3), cache, structured())

    assert out.value == Answer(answer="Paris")
    assert fake.served == ["refused"] * 3 + [None]
    last = fake.requests[-1]
    assert "response_format" not in last
    assert last["messages"][: len(MESSAGES)] == MESSAGES
    assert '"answer"' in last["messages"][-1]["content"]  # the schema, spelled out


def test_a_refusal_that_is_not_about_the_format_fails_at_once(cache: ResponseCache) -> None:
    with FakeOpenAIServer(llama_cpp=True) as fake:
        out = drive(endpoint_for(fake, max_retries=3), cache, ask(response_format={"type": "x"}))

    assert out.error is not None and out.error.reason == "http_500"
    assert fake.served == ["refused"]  # not retried as a transient 500


# --- the response cache ----------------------------------------------------------------------


def test_identical_request_is_served_from_cache(
    server: FakeOpenAIServer, cache: ResponseCache
) -> None:
    endpoint = endpoint_for(server)

    async def twice(client: LLMClient) -> list[Any]:
        return [await client.chat("generator", MESSAGES, seed=1) for _ in range(2)]

    out = drive(endpoint, cache, twice)

    first, second = out.value
    assert len(server.requests) == 1
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text and second.usage == first.usage
    assert [c.cached for c in out.calls] == [False, True]
    assert out.calls[1].ok and out.calls[1].cost_usd == 0

    again = drive(endpoint, ResponseCache(cache.root), ask(seed=1))  # a new client, same folder
    assert len(server.requests) == 1
    assert again.value.cached is True and again.value.text == "Paris"


def test_different_seed_is_a_different_cache_key(
    server: FakeOpenAIServer, cache: ResponseCache
) -> None:
    async def seeds(client: LLMClient) -> list[Any]:
        return [await client.chat("generator", MESSAGES, seed=s) for s in (1, 2, 1)]

    out = drive(endpoint_for(server), cache, seeds)

    assert [r.cached for r in out.value] == [False, False, True]
    assert [r["seed"] for r in server.requests] == [1, 2]
    assert len(cache_entries(cache)) == 2


# --- sampling and concurrency ----------------------------------------------------------------


def test_sample_without_n_makes_seeded_requests(cache: ResponseCache) -> None:
    with FakeOpenAIServer(lambda body: f"answer {body['seed']}") as fake:
        out = drive(endpoint_for(fake, supports_n=False), cache, sample(n=3, seed=10))

    assert sorted(r.text for r in out.value) == ["answer 10", "answer 11", "answer 12"]
    assert sorted(r["seed"] for r in fake.requests) == [10, 11, 12]
    assert all("n" not in r for r in fake.requests)


def test_requests_without_sampling_settings_take_the_endpoints() -> None:
    async def defaults_then_explicit(llm: LLMClient) -> None:
        await llm.chat("generator", MESSAGES)
        await llm.chat("generator", MESSAGES, temperature=0.0, seed=3)

    with FakeOpenAIServer(lambda body: "Paris") as fake:
        drive(endpoint_for(fake, temperature=0.7, seed=11), None, defaults_then_explicit)
        drive(endpoint_for(fake), None, lambda llm: llm.chat("generator", MESSAGES))

    settings = [(r["temperature"], r.get("seed")) for r in fake.requests]
    assert settings == [(0.7, 11), (0.0, 3), (0.0, None)]


def test_sample_with_n_makes_one_request(cache: ResponseCache) -> None:
    with FakeOpenAIServer(lambda body: f"choice {body['_choice']}") as fake:
        out = drive(endpoint_for(fake, supports_n=True), cache, sample(n=3, seed=10))

    assert [r.text for r in out.value] == ["choice 0", "choice 1", "choice 2"]
    (body,) = fake.requests
    assert (body["n"], body["seed"]) == (3, 10)
    assert all(r.usage.completion_tokens == 2 for r in out.value)  # 6 tokens shared by 3


def seed_answer(body: dict[str, Any]) -> str:
    return f"answer {body['seed']}"


def test_endpoint_concurrency_limit_is_respected(cache: ResponseCache) -> None:
    slow = PeakInFlight(0.2, seed_answer)

    async def many(client: LLMClient) -> list[Any]:
        calls = [client.chat("generator", MESSAGES, seed=s) for s in range(6)]
        return list(await asyncio.gather(*calls))

    with FakeOpenAIServer(slow) as fake:
        out = drive(endpoint_for(fake, max_concurrency=2), cache, many)

    assert [r.text for r in out.value] == [f"answer {s}" for s in range(6)]
    assert len(fake.requests) == 6
    assert slow.peak == 2


def test_the_concurrency_limit_holds_across_clients_in_other_threads(
    cache: ResponseCache,
) -> None:
    """Stage batches run at once in threads, each with its own client and event loop: together
    they keep to the server's limit."""
    slow = PeakInFlight(0.1, seed_answer)

    def batch(first: int) -> Callable[[LLMClient], Awaitable[Any]]:
        async def many(client: LLMClient) -> list[Any]:
            calls = [client.chat("generator", MESSAGES, seed=s) for s in range(first, first + 4)]
            return list(await asyncio.gather(*calls))

        return many

    with FakeOpenAIServer(slow) as fake:
        endpoint = endpoint_for(fake, max_concurrency=2)
        outcomes: list[Outcome] = []
        threads = [
            threading.Thread(target=lambda f=f: outcomes.append(drive(endpoint, cache, batch(f))))
            for f in (0, 4, 8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    texts = sorted(r.text for out in outcomes for r in out.value)
    assert texts == sorted(f"answer {s}" for s in range(12))
    assert slow.peak == 2
