"""The interception proxy between the openai SDK and the fake upstream server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest

from data.lake import Lake, ProxyCall, utcnow
from data.llm import LLMClient
from data.scrub import Scrubber
from flows.stage_runs import solver_through_proxy
from harnesses.proxy import running_proxy
from harnesses.proxy_records import CallRecorder, StreamAssembler
from tests.conftest import endpoints_for, make_context
from tests.fakes.openai_server import FakeOpenAIServer, PeakInFlight

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = [{"role": "user", "content": "Which river runs through Tessaly Port?"}]


def sdk(base_url, key="client-key", retries=0, rollout="rollout-1"):
    headers = {"X-Rollout-Id": rollout} if rollout else {}
    return openai.OpenAI(
        base_url=base_url, api_key=key, max_retries=retries, default_headers=headers, timeout=10
    )


@contextmanager
def proxied(lake, upstream, **options):
    """The upstream fake and the proxy in front of it; yields the proxy's base URL."""
    with upstream, running_proxy(upstream.base_url, lake, "run-1", **options) as url:
        yield url


def calls(lake):
    return lake.rows("SELECT * FROM proxy_calls ORDER BY started_at")


@pytest.fixture
def lake(tmp_path):
    return Lake(tmp_path / "home")


def test_a_call_is_forwarded_and_recorded_with_its_rollout(lake):
    upstream = FakeOpenAIServer(lambda body: "The River Kelm")
    with proxied(lake, upstream) as url:
        reply = sdk(url).chat.completions.create(
            model="fake-model", messages=MESSAGES, temperature=0.7, seed=3, max_tokens=20
        )
    assert reply.choices[0].message.content == "The River Kelm"
    (call,) = calls(lake)
    assert call["rollout_id"] == "rollout-1" and call["status"] == 200 and not call["error"]
    assert json.loads(call["messages"]) == MESSAGES
    assert json.loads(call["params"]) == {"temperature": 0.7, "seed": 3, "max_tokens": 20}
    (choice,) = json.loads(call["response"])
    assert choice["message"]["content"] == "The River Kelm"
    assert call["finish_reason"] == "stop" and call["model"] == "fake-model"
    assert call["prompt_tokens"] > 0 and call["completion_tokens"] == 3
    assert call["latency_s"] >= 0 and not call["stream"]
    assert upstream.requests[0]["seed"] == 3  # the body reached the upstream unchanged


def test_an_sdk_retry_of_the_same_body_is_recorded_once(lake):
    upstream = FakeOpenAIServer(faults=["500"])
    with proxied(lake, upstream) as url:
        sdk(url, retries=2).chat.completions.create(model="fake-model", messages=MESSAGES)
    assert len(upstream.requests) == 2
    (call,) = calls(lake)
    assert (call["status"], call["retry"], call["error"]) == (200, 1, "")


def test_upstream_errors_pass_through_faithfully(lake):
    upstream = FakeOpenAIServer(faults=["429"], retry_after_s=7)
    with proxied(lake, upstream) as url, pytest.raises(openai.RateLimitError) as raised:
        sdk(url).chat.completions.create(model="fake-model", messages=MESSAGES)
    assert raised.value.response.headers["retry-after"] == "7"
    assert raised.value.body["code"] == "429"
    (call,) = calls(lake)
    assert call["status"] == 429 and "Rate limit" in call["error"]


def test_an_unreachable_upstream_is_a_502_and_recorded(lake):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with (
        running_proxy(f"http://127.0.0.1:{port}/v1", lake, "run-1") as url,
        pytest.raises(openai.InternalServerError) as raised,
    ):
        sdk(url).chat.completions.create(model="fake-model", messages=MESSAGES)
    assert raised.value.status_code == 502
    (call,) = calls(lake)
    assert call["status"] == 502 and "unreachable" in call["error"]


def test_a_stream_is_relayed_and_recorded_assembled(lake):
    upstream = FakeOpenAIServer(lambda body: "It is the River Kelm")
    with proxied(lake, upstream) as url:
        stream = sdk(url).chat.completions.create(
            model="fake-model",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "It is the River Kelm"
    (call,) = calls(lake)
    (choice,) = json.loads(call["response"])
    assert choice["message"]["content"] == text and call["finish_reason"] == "stop"
    assert call["stream"] and call["completion_tokens"] == 5 and not call["error"]


def test_a_client_that_disconnects_mid_stream_is_recorded_and_the_proxy_goes_on(lake):
    long_answer = " ".join(["word"] * 50)
    upstream = FakeOpenAIServer(lambda body: long_answer, chunk_delay_s=0.05)
    with proxied(lake, upstream) as url:
        body = {"model": "fake-model", "messages": MESSAGES, "stream": True}
        with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=10) as reply:
            next(reply.iter_raw())  # read the first chunk, then hang up
        after = sdk(url, rollout="rollout-2").chat.completions.create(
            model="fake-model", messages=MESSAGES
        )
    assert after.choices[0].message.content == long_answer
    first, second = sorted(calls(lake), key=lambda c: c["rollout_id"])
    assert first["rollout_id"] == "none" and "disconnected" in first["error"]
    assert first["stream"] and second["status"] == 200 and not second["error"]


def test_without_a_rollout_header_the_key_names_the_rollout_and_is_not_stored(lake):
    with proxied(lake, FakeOpenAIServer(), api_key="upstream-key") as url:
        sdk(url, key="sk-secret-rollout-7", rollout=None).chat.completions.create(
            model="fake-model", messages=MESSAGES
        )
        bad = httpx.post(f"{url}/chat/completions", content=b"{not json", timeout=10)
    assert bad.status_code == 400
    good, broken = sorted(calls(lake), key=lambda c: c["status"])
    assert good["rollout_id"].startswith("key:") and broken["status"] == 400
    assert "sk-secret-rollout-7" not in json.dumps(calls(lake), default=str)


def test_foundry_proxy_records_until_interrupted(tmp_path):
    home = tmp_path / "home"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with FakeOpenAIServer(lambda body: "Kelm") as upstream:
        command = [sys.executable, "-m", "flows.cli", "proxy", "--home", str(home)]
        command += ["--upstream", upstream.base_url, "--port", str(port)]
        server = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        try:
            url = f"http://127.0.0.1:{port}/v1"
            for _ in range(200):
                try:
                    httpx.get(f"{url}/models", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.05)
            reply = sdk(url).chat.completions.create(model="fake-model", messages=MESSAGES)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=20)
    assert reply.choices[0].message.content == "Kelm"
    (call,) = calls(Lake(home))
    assert call["rollout_id"] == "rollout-1" and call["status"] == 200
    assert [r["state"] for r in Lake(home).runs()] == ["completed"]


def test_beyond_loopback_the_proxy_needs_a_key(lake, tmp_path):
    with (
        pytest.raises(ValueError, match="beyond this machine"),
        running_proxy("http://127.0.0.1:9/v1", lake, "run-1", host="0.0.0.0"),
    ):
        pass
    cli = [sys.executable, "-m", "flows.cli", "proxy", "--home", str(tmp_path / "cli")]
    cli += ["--upstream", "http://127.0.0.1:9/v1", "--host", "0.0.0.0"]
    keyless = {k: v for k, v in os.environ.items() if k != "FOUNDRY_PROXY_KEY"}
    refused = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=60, env=keyless)
    assert refused.returncode == 2 and "access key" in refused.stderr


def test_a_keyed_proxy_refuses_requests_without_its_key(lake):
    upstream = FakeOpenAIServer(lambda body: "Kelm")
    with proxied(lake, upstream, host="0.0.0.0", access_key="door-key") as url:
        with pytest.raises(openai.AuthenticationError):
            sdk(url).chat.completions.create(model="fake-model", messages=MESSAGES)
        assert httpx.get(f"{url}/models", timeout=10).status_code == 401
        keyed = openai.OpenAI(
            base_url=url,
            api_key="client-key",
            max_retries=0,
            default_headers={"X-Rollout-Id": "r-9", "X-Proxy-Key": "door-key"},
        )
        reply = keyed.chat.completions.create(model="fake-model", messages=MESSAGES)
    assert reply.choices[0].message.content == "Kelm"
    (call,) = calls(lake)  # the refused requests were neither forwarded nor recorded
    assert call["rollout_id"] == "r-9" and len(upstream.requests) == 1
    assert "door-key" not in json.dumps(calls(lake), default=str)


def test_a_run_whose_proxy_listens_beyond_loopback_keys_it_for_the_solver(tmp_path):
    ctx = make_context(tmp_path / "home", runner={"proxy_host": "0.0.0.0"})
    with FakeOpenAIServer(lambda body: "Kelm") as upstream:
        endpoints = endpoints_for(upstream)
        with solver_through_proxy(ctx, endpoints) as proxied_endpoints:
            solver = proxied_endpoints["solver"]
            [(header, key)] = solver.headers
            assert header == "x-proxy-key" and len(key) >= 24
            assert httpx.get(f"{solver.base_url}/models", timeout=10).status_code == 401

            async def ask():
                llm = LLMClient(proxied_endpoints, None, "run-1")
                try:
                    return await llm.chat("solver", MESSAGES, rollout_id="r-1")
                finally:
                    await llm.aclose()

            assert asyncio.run(ask()).text == "Kelm"


def test_the_solver_behind_the_proxy_counts_against_its_servers_request_limit(tmp_path):
    """Generator and solver on one server with room for one request: the proxy in front of the
    solver does not open a second slot."""
    slow = PeakInFlight(0.05, lambda body: "Kelm")
    ctx = make_context(tmp_path / "home")
    with FakeOpenAIServer(slow) as upstream:
        endpoints = endpoints_for(upstream, max_concurrency=1)
        with solver_through_proxy(ctx, endpoints) as proxied_endpoints:
            assert proxied_endpoints["solver"].server == upstream.base_url

            async def ask_both():
                llm = LLMClient(proxied_endpoints, None, "run-1")
                try:
                    asks = [
                        llm.chat(role, MESSAGES, seed=i)
                        for i in range(3)
                        for role in ("solver", "generator")
                    ]
                    return await asyncio.gather(*asks)
                finally:
                    await llm.aclose()

            replies = asyncio.run(ask_both())

    assert [r.text for r in replies] == ["Kelm"] * 6
    assert slow.peak == 1


def test_identical_requests_are_separate_calls_unless_the_sdk_says_retry(lake):
    recorder = CallRecorder(lake, "run-1")
    first, second = (recorder.call_id("r", "body", retry=0) for _ in range(2))
    retry_of_second = recorder.call_id("r", "body", retry=1)
    assert first != second == retry_of_second


def test_a_late_answer_to_an_abandoned_attempt_does_not_replace_the_retry(lake):
    recorder = CallRecorder(lake, "run-1")
    call_id = recorder.call_id("r", "body", retry=0)
    base = {
        "call_id": call_id, "rollout_id": "r", "started_at": utcnow(), "model": "m",
        "messages": "[]", "params": "{}", "response": "[]", "finish_reason": "stop",
        "prompt_tokens": 1, "completion_tokens": 1, "latency_s": 0.1, "status": 200,
        "error": "", "stream": False,
    }  # fmt: skip
    recorder.add(ProxyCall(**base, retry=1))
    recorder.flush()
    recorder.add(ProxyCall(**base, retry=0))  # the timed-out first attempt, answered late
    recorder.flush()
    (call,) = calls(lake)
    assert call["retry"] == 1


def test_the_stream_assembler_reads_crlf_events_a_tail_and_survives_garbage():
    assembler = StreamAssembler()
    delta = {"choices": [{"index": 0, "delta": {"content": "Kelm"}, "finish_reason": None}]}
    assembler.feed(f"data: {json.dumps(delta)}\r\n\r\ndata: [1, 2]\r\n\r\ndata: {{bad".encode())
    assembler.feed(b"\r\n\r\n")
    done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    assembler.feed(f"data: {json.dumps(done)}".encode())  # no closing blank line
    assembler.finish()
    (choice,) = assembler.response()["choices"]
    assert choice["message"]["content"] == "Kelm" and choice["finish_reason"] == "stop"
    assert len(assembler.problems) == 2  # the list and the broken JSON


def proxy_call(call_id: str, text: str, answer: str = "") -> ProxyCall:
    messages = [{"role": "user", "content": text}]
    choices = [{"message": {"role": "assistant", "content": answer}}]
    return ProxyCall(
        call_id=call_id, rollout_id="r", started_at=utcnow(), model="m",
        messages=json.dumps(messages), params="{}", response=json.dumps(choices),
        finish_reason="stop", prompt_tokens=1, completion_tokens=1, latency_s=0.1,
        status=200, error="", stream=False, retry=0,
    )  # fmt: skip


def test_a_scrubbing_recorder_writes_no_personal_data(lake):
    recorder = CallRecorder(lake, "run-1", scrubber=Scrubber())
    text = "I am ana@example.com, call +44 20 7946 0958"
    recorder.add(proxy_call("c", text, "Hi ana@example.com"))
    recorder.flush()
    (call,) = calls(lake)
    stored = json.dumps(call, default=str)
    assert "ana@example.com" not in stored and "7946" not in stored
    assert json.loads(call["messages"])[0]["content"] == "I am [EMAIL], call [PHONE]"


def test_a_call_being_scrubbed_holds_up_no_other_call(lake):
    """The request handlers only buffer calls; scrubbing happens when the recorder's own thread
    writes them, so a request that takes long to scrub never stalls the event loop."""
    scrubbing, release = threading.Event(), threading.Event()

    class SlowOnBigCalls(Scrubber):
        def scrub(self, text, counts=None):
            if "BIG" in text:
                scrubbing.set()
                release.wait(60)
            return super().scrub(text, counts)

    recorder = CallRecorder(lake, "run-1", flush_every_s=0.05, scrubber=SlowOnBigCalls())
    recorder.start()
    try:
        handler = threading.Thread(target=recorder.add, args=(proxy_call("a", "BIG bo@x.org"),))
        handler.start()
        handler.join(20)
        assert not handler.is_alive()  # buffered without being scrubbed
        assert scrubbing.wait(20)  # the recorder's thread scrubs it
        recorder.add(proxy_call("b", "then cy@x.org"))  # and calls keep coming in meanwhile
    finally:
        release.set()
        recorder.close()
    stored = {c["call_id"]: json.loads(c["messages"])[0]["content"] for c in calls(lake)}
    assert stored == {"a": "BIG [EMAIL]", "b": "then [EMAIL]"}
