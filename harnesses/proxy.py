"""The interception proxy: an OpenAI-compatible server in front of a model server that records
every chat completion into the lake, grouped by rollout.

Requests are forwarded byte for byte and answers come back as the upstream sent them (status,
body, `Retry-After` and rate-limit headers), streamed or not, so a client cannot tell the proxy
is there. Each call is recorded with its request, response (assembled from the stream when
streamed), model, sampling settings, usage, latency, finish reason and error. The rollout id is
the `X-Rollout-Id` header, else a hash of the API key. An SDK retry resends the same body: it
shares the first attempt's record id, so the call is recorded once (with the final outcome). A
client that disconnects mid-stream is recorded as such. Records are buffered and written as lake
shards every `flush_every_s` and when the proxy stops. With a `Scrubber` (as `foundry proxy` runs
in front of production traffic) what is recorded is scrubbed first, so the lake never holds the
secrets and personal data that passed through; what is forwarded is never changed.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from data.lake import Lake, ProxyCall, utcnow
from data.scrub import Scrubber
from harnesses.proxy_records import CallRecorder, StreamAssembler

ROLLOUT_HEADER = "x-rollout-id"
ACCESS_HEADER = "x-proxy-key"  # the proxy's own key, required when it listens beyond loopback
RETRY_HEADER = "x-stainless-retry-count"  # set by the openai SDKs on every attempt
PASSED_HEADERS = ("retry-after", "x-request-id")
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "seed",
    "n",
    "stop",
    "tools",
    "tool_choice",
    "response_format",
    "stream",
)


def rollout_of(headers: Any) -> str:
    """The rollout a request belongs to: its X-Rollout-Id header, else a hash of its API key."""
    if headers.get(ROLLOUT_HEADER):
        return headers[ROLLOUT_HEADER]
    token = headers.get("authorization", "").removeprefix("Bearer ").strip()
    return "key:" + hashlib.sha256(token.encode()).hexdigest()[:16] if token else "none"


@dataclass
class _Exchange:
    """One client request on its way through the proxy, and how it gets recorded."""

    recorder: CallRecorder
    request: Request
    body: dict[str, Any]
    raw: bytes
    started: float = field(default_factory=time.monotonic)
    started_at: datetime = field(default_factory=utcnow)
    rollout: str = ""
    retry: int = 0
    call_id: str = ""

    def __post_init__(self) -> None:
        self.rollout = rollout_of(self.request.headers)
        try:
            self.retry = int(self.request.headers.get(RETRY_HEADER, "0"))
        except ValueError:
            self.retry = 0
        body_hash = hashlib.sha256(self.raw).hexdigest()
        self.call_id = self.recorder.call_id(self.rollout, body_hash, self.retry)

    def record(self, status: int, response: dict[str, Any] | None = None, error: str = "") -> None:
        choices = (response or {}).get("choices") or []
        usage = (response or {}).get("usage") or {}
        body = self.body
        self.recorder.add(
            ProxyCall(
                call_id=self.call_id,
                rollout_id=self.rollout,
                started_at=self.started_at,
                model=str((response or {}).get("model") or body.get("model", "")),
                messages=json.dumps(body.get("messages", []), ensure_ascii=False),
                params=json.dumps({k: body[k] for k in SAMPLING_KEYS if k in body}, sort_keys=True),
                response=json.dumps(choices, ensure_ascii=False),
                finish_reason=str(choices[0].get("finish_reason") or "") if choices else "",
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                latency_s=time.monotonic() - self.started,
                status=status,
                error=error[:500],
                stream=bool(body.get("stream")),
                retry=self.retry,
            )
        )

    def unreachable(self, exc: Exception) -> JSONResponse:
        error = f"upstream unreachable: {type(exc).__name__}: {exc}"
        self.record(502, error=error)
        return _error(502, error, "upstream_error")


def _relayed(reply: httpx2.Response, content: bytes) -> Response:
    """The upstream's answer as the client gets it: status, body, rate-limit headers."""
    return Response(
        content,
        reply.status_code,
        headers=_passed(reply.headers),
        media_type=reply.headers.get("content-type", "application/json"),
    )


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


def _passed(headers: httpx2.Headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k in PASSED_HEADERS or k.startswith("x-ratelimit-")}


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine's loopback only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_key_off_loopback(host: str, access_key: str | None) -> None:
    """Refuse to serve recorded traffic to the network without a key."""
    if not is_loopback(host) and not access_key:
        raise ValueError(
            f"the proxy would listen on {host}, beyond this machine: give it an access key"
        )


def create_app(
    upstream: str,
    recorder: CallRecorder,
    api_key: str | None = None,
    timeout_s: float = 600.0,
    access_key: str | None = None,
) -> Starlette:
    """The proxy as an ASGI app. With `api_key` the upstream gets that key (and the client's
    key only names the rollout); without it the client's Authorization header is forwarded.
    With `access_key` every request must carry it in the `X-Proxy-Key` header (else 401,
    nothing forwarded or recorded)."""
    base = upstream.rstrip("/")

    def refused(request: Request) -> Response | None:
        given = request.headers.get(ACCESS_HEADER, "")
        if access_key and not hmac.compare_digest(given.encode(), access_key.encode()):
            return _error(401, f"this proxy needs its key in {ACCESS_HEADER}", "auth_error")
        return None

    client: dict[str, httpx2.AsyncClient] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        client["http"] = httpx2.AsyncClient(timeout=timeout_s)
        try:
            yield
        finally:
            await client["http"].aclose()

    def upstream_headers(request: Request) -> dict[str, str]:
        # identity: the stream is relayed byte for byte, so it must not come compressed
        headers = {"content-type": "application/json", "accept-encoding": "identity"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        elif "authorization" in request.headers:
            headers["authorization"] = request.headers["authorization"]
        return headers

    async def models(request: Request) -> Response:
        if (denied := refused(request)) is not None:
            return denied
        try:
            reply = await client["http"].get(f"{base}/models", headers=upstream_headers(request))
        except httpx2.HTTPError as exc:
            return _error(502, f"upstream unreachable: {exc}", "upstream_error")
        return Response(reply.content, reply.status_code, media_type="application/json")

    async def chat(request: Request) -> Response:
        if (denied := refused(request)) is not None:
            return denied
        started = time.monotonic()
        raw = await request.body()
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("the body is not a JSON object")
        except ValueError as exc:
            _Exchange(recorder, request, {}, raw, started).record(400, error=str(exc))
            return _error(400, f"invalid JSON body: {exc}", "invalid_request_error")
        exchange = _Exchange(recorder, request, body, raw, started)
        url, headers = f"{base}/chat/completions", upstream_headers(request)
        if body.get("stream"):
            return await _stream(exchange, url, headers)
        try:
            reply = await client["http"].post(url, content=raw, headers=headers)
        except httpx2.HTTPError as exc:
            return exchange.unreachable(exc)
        try:
            parsed = reply.json() if reply.status_code == 200 else None
        except ValueError:
            parsed = None
        error = "" if reply.status_code == 200 else reply.text[:500]
        if reply.status_code == 200 and parsed is None:
            error = "upstream answered 200 with a body that is not JSON"
        exchange.record(reply.status_code, parsed, error)
        return _relayed(reply, reply.content)

    async def _stream(exchange: _Exchange, url: str, headers: dict[str, str]) -> Response:
        http = client["http"]
        request = http.build_request("POST", url, content=exchange.raw, headers=headers)
        try:
            reply = await http.send(request, stream=True)
        except httpx2.HTTPError as exc:
            return exchange.unreachable(exc)
        if reply.status_code != 200:
            content = await reply.aread()
            await reply.aclose()
            exchange.record(reply.status_code, error=content.decode("utf-8", "replace"))
            return _relayed(reply, content)
        assembled = StreamAssembler()

        async def relay() -> AsyncIterator[bytes]:
            ended = False
            error = ""
            try:
                async for data in reply.aiter_raw():
                    assembled.feed(data)
                    yield data
                assembled.finish()
                ended = True
            except httpx2.HTTPError as exc:
                error = f"upstream stream broke: {type(exc).__name__}: {exc}"
            finally:
                await reply.aclose()
                # a client that hangs up once it has read `[DONE]` (SDKs do) read it all
                if not ended and not error and not assembled.done:
                    error = "client disconnected before the stream ended"
                error = error or "; ".join(assembled.problems)[:500]
                exchange.record(200, assembled.response(), error)

        return StreamingResponse(
            relay(), status_code=200, headers=_passed(reply.headers), media_type="text/event-stream"
        )

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ],
        lifespan=lifespan,
    )


@contextmanager
def running_proxy(
    upstream: str,
    lake: Lake,
    run_id: str,
    *,
    api_key: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    flush_every_s: float = 1.0,
    timeout_s: float = 600.0,
    access_key: str | None = None,
) -> Iterator[str]:
    """Run the proxy on a background thread; yields its base URL (`http://host:port/v1`).
    Every recorded call is in the lake when the block exits. Bound anywhere but loopback it
    needs `access_key` (see `create_app`)."""
    require_key_off_loopback(host, access_key)
    recorder = CallRecorder(lake, run_id, flush_every_s)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(upstream, recorder, api_key, timeout_s, access_key),
            host=host,
            port=port,
            log_level="warning",
            lifespan="on",
        )
    )
    thread = threading.Thread(target=server.run, name="proxy-server", daemon=True)
    recorder.start()
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError(f"the proxy could not start on {host}:{port}")
            time.sleep(0.01)
        bound = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://{host}:{bound}/v1"
    finally:
        server.should_exit = True
        thread.join()
        recorder.close()


def serve(
    upstream: str,
    lake: Lake,
    run_id: str,
    *,
    api_key: str | None,
    host: str,
    port: int,
    scrubber: Scrubber | None = None,
    access_key: str | None = None,
) -> None:
    """Run the proxy in the foreground until interrupted (`foundry proxy`); with `scrubber`,
    recorded calls are scrubbed before they are written. Bound anywhere but loopback it needs
    `access_key`."""
    require_key_off_loopback(host, access_key)
    recorder = CallRecorder(lake, run_id, scrubber=scrubber)
    recorder.start()
    try:
        app = create_app(upstream, recorder, api_key, access_key=access_key)
        uvicorn.run(app, host=host, port=port, log_level="info")
    finally:
        recorder.close()
