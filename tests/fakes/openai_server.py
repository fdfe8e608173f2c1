"""A fake OpenAI-compatible chat server on loopback, with scripted and random fault injection.

Stdlib only: a `ThreadingHTTPServer` served from a daemon thread. It speaks enough of the API for
the official `openai` SDK: `GET /v1/models` and `POST /v1/chat/completions` (HTTP/1.1, keep-alive,
JSON bodies with a Content-Length; `"stream": true` answers with server-sent events, one chunk
per word, `chunk_delay_s` apart, sent with chunked transfer encoding).

Fault kinds (scripted through `faults`, one per chat request in order, or drawn at random with
`fault_rate` from `fault_kinds`, dealt like cards from a shuffled deck so that every kind is
served once before any is served again, however few requests a run makes):

- `"429"`: rate limited, with a `Retry-After: <retry_after_s>` header;
- `"500"`, `"503"`: server errors with an OpenAI-style error body;
- `"reset"`: the connection is dropped (RST) without any response;
- `"hang"`: the answer is delayed by `hang_s` (longer than the client timeout in tests);
- `"malformed"`: a 200 whose message content is truncated JSON (`{"answer": "Par`), whatever
  was asked: a model answering garbage;
- `"truncated_json"`: a 200 whose content is the first half of the responder's answer, drawn
  only for requests that ask for JSON (`response_format`): structured output cut off;
- `"empty"`: a 200 whose message content is `""`;
- `"garbage_body"`: a 200 whose body is not JSON at all.

Server kinds (what a real server accepts): `llama_cpp=True` answers a `json_schema`
response_format with llama.cpp's HTTP 500 ("Input should be 'text' or 'json_object'") and
ignores `n`; `formats` names the response_format types taken (the others answered the same
way); `api_key` refuses other keys with a 401; `strict_model=True` answers requests for a
model other than `model` with a 404. `tool_calls` says what becomes of a request's `tools`:
`"model"` shows them to the responder, whose dict answer is tool calls (the default, as
OpenAI or vLLM with a tool parser); `"never"` hides them from it, so no reply carries a call
(llama.cpp's server without a `tool_choice` naming a tool; the default with `llama_cpp`);
`"refused"` answers a request with `tools` with llama.cpp's HTTP 500 ("tools param requires
--jinja flag").
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import struct
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal
from urllib.parse import urlsplit

Responder = Callable[[dict[str, Any]], str | dict[str, Any]]  # a dict: tool calls
ToolCallMode = Literal["model", "never", "refused"]
TOOLS_REFUSAL = "tools param requires --jinja flag"

FAULT_KINDS = frozenset(
    {"429", "500", "503", "reset", "hang", "malformed", "truncated_json", "empty", "garbage_body"}
)
MALFORMED_CONTENT = '{"answer": "Par'
GARBAGE_BODY = b"<html><body>upstream said: this is not JSON {{{</body></html>"

_STATUS_ERRORS = {
    "429": (429, "rate_limit_error", "Rate limit reached, please retry later."),
    "500": (500, "server_error", "The server had an error while processing your request."),
    "503": (503, "server_error", "The server is overloaded, please retry later."),
}


def _default_responder(body: dict[str, Any]) -> str:
    return "ok"


class PeakInFlight:
    """A responder that holds each request `seconds` before `answer` answers it, and remembers
    the most requests it held at once (`peak`)."""

    def __init__(self, seconds: float, answer: Responder) -> None:
        self.seconds = seconds
        self.answer = answer
        self.peak = 0
        self._held = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str | dict[str, Any]:
        with self._lock:
            self._held += 1
            self.peak = max(self.peak, self._held)
        try:
            time.sleep(self.seconds)
        finally:
            with self._lock:
                self._held -= 1
        return self.answer(body)


def _message(content: str | dict[str, Any]) -> dict[str, Any]:
    """The assistant message of a responder's answer: text, or a dict of `tool_calls`
    (each `{"id", "name", "arguments"}`) and optional `content`."""
    if not isinstance(content, dict):
        return {"role": "assistant", "content": content}
    calls = [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": call["arguments"]},
        }
        for call in content["tool_calls"]
    ]
    return {"role": "assistant", "content": content.get("content"), "tool_calls": calls}


def _words(text: Any) -> int:
    return len(str(text or "").split())


def _error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class FakeOpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1 with an ephemeral port; use as a context manager.

    `requests` holds every chat-completion request body received (faulted ones included), and
    `request_times` the matching server-side `time.monotonic()` arrival times; `served` holds
    the fault applied to each of them (`None` when it was answered normally).
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        model: str = "fake-model",
        faults: list[str] | None = None,
        fault_rate: float = 0.0,
        fault_kinds: Sequence[str] = (),
        seed: int = 0,
        latency_s: float = 0.0,
        retry_after_s: float = 1.0,
        hang_s: float = 5.0,
        chunk_delay_s: float = 0.0,
        llama_cpp: bool = False,
        formats: Sequence[str] | None = None,
        api_key: str | None = None,
        strict_model: bool = False,
        tool_calls: ToolCallMode | None = None,
    ) -> None:
        unknown = sorted({*(faults or ()), *fault_kinds} - FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; known: {sorted(FAULT_KINDS)}")
        if fault_rate > 0 and not fault_kinds:
            raise ValueError("fault_rate > 0 needs at least one of fault_kinds")
        self.responder = responder or _default_responder
        self.model = model
        self.fault_rate = fault_rate
        self.fault_kinds = tuple(fault_kinds)
        self.latency_s = latency_s
        self.retry_after_s = retry_after_s
        self.hang_s = hang_s
        self.chunk_delay_s = chunk_delay_s
        self.llama_cpp = llama_cpp
        self.formats = tuple(formats) if formats is not None else None
        if llama_cpp and formats is None:
            self.formats = ("text", "json_object")
        self.api_key = api_key
        self.strict_model = strict_model
        self.tool_calls: ToolCallMode = tool_calls or ("never" if llama_cpp else "model")
        self.requests: list[dict[str, Any]] = []
        self.request_times: list[float] = []
        self.served: list[str | None] = []
        self._script: deque[str] = deque(faults or ())
        self._rng = random.Random(seed)
        self._deck: list[str] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1` (available once started)."""
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAIServer:
        """Bind an ephemeral loopback port and serve from a daemon thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-openai-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake hanging handlers and drop open (keep-alive) connections."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- bookkeeping used by the handler ---------------------------------------------------

    def _admit(self, body: dict[str, Any], refused: bool = False) -> str | None:
        """Record a chat request and pick its fault (script first, then the random draw);
        a request the server refused is recorded as served `"refused"`."""
        with self._lock:
            self.requests.append(body)
            self.request_times.append(time.monotonic())
            if refused:
                self.served.append("refused")
                return None
            fault: str | None = None
            if self._script:
                fault = self._script.popleft()
            elif self.fault_rate > 0 and self._rng.random() < self.fault_rate:
                if not self._deck:
                    self._deck = self._rng.sample(list(self.fault_kinds), len(self.fault_kinds))
                fault = self._deck.pop()
            if fault == "truncated_json" and not body.get("response_format"):
                fault = None
            self.served.append(fault)
            return fault

    def _track(self, conn: socket.socket, alive: bool) -> None:
        with self._lock:
            if alive:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _completion(self, body: dict[str, Any], fault: str | None) -> dict[str, Any]:
        """A chat.completion object for `body`; content comes from the responder or the fault."""
        n = 1 if self.llama_cpp else int(body.get("n") or 1)
        shown = body
        if self.tool_calls == "never":  # the model never sees the tools
            shown = {k: v for k, v in body.items() if k not in ("tools", "tool_choice")}
        if fault == "malformed":
            contents = [MALFORMED_CONTENT] * n
        elif fault == "empty":
            contents = [""] * n
        elif n == 1:
            contents = [self.responder(shown)]
        else:
            contents = [self.responder({**shown, "_choice": i}) for i in range(n)]
        if fault == "truncated_json":
            contents = [c[: len(c) // 2] if isinstance(c, str) else c for c in contents]
        prompt_tokens = sum(_words(m.get("content")) for m in body.get("messages") or [])
        completion_tokens = sum(_words(_message(c)["content"]) for c in contents)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [
                {
                    "index": i,
                    "message": _message(content),
                    "logprobs": None,
                    "finish_reason": "tool_calls" if isinstance(content, dict) else "stop",
                }
                for i, content in enumerate(contents)
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


class _HTTPServer(ThreadingHTTPServer):
    """Threading server that knows its fake and stays quiet about dropped connections."""

    daemon_threads = True
    request_queue_size = 128  # the stdlib's 5 overflows when a batch opens many connections

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        fake: FakeOpenAIServer,
    ) -> None:
        self.fake = fake
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Dropped and reset connections are expected here; report anything else."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1.0"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stall
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, alive=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, alive=False)

    # --- routes --------------------------------------------------------------------------

    def _refused(self, body: dict[str, Any] | None) -> bool:
        """Answer what this kind of server refuses (see the module doc); True if it did."""
        fake = self.server.fake
        if fake.api_key and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            self._send_json(401, _error_body("Incorrect API key provided", "invalid_request_error"))
            return True
        if body is None:
            return False
        if fake.strict_model and body.get("model") != fake.model:
            message = f"The model `{body.get('model')}` does not exist"
            self._send_json(404, _error_body(message, "invalid_request_error", "model_not_found"))
            return True
        if fake.tool_calls == "refused" and body.get("tools"):
            self._send_json(500, _error_body(TOOLS_REFUSAL, "server_error"))
            return True
        kind = (body.get("response_format") or {}).get("type")
        if kind is not None and fake.formats is not None and kind not in fake.formats:
            taken = " or ".join(repr(f) for f in fake.formats)
            message = f"1 validation error: Input should be {taken}"
            self._send_json(500, _error_body(message, "internal_server_error"))
            return True
        return False

    def do_GET(self) -> None:
        fake = self.server.fake
        if self._refused(None):
            return
        if urlsplit(self.path).path.rstrip("/") == "/v1/models":
            models = [{"id": fake.model, "object": "model", "created": 0, "owned_by": "fake"}]
            self._send_json(200, {"object": "list", "data": models})
        else:
            self._send_json(404, _error_body(f"no route {self.path}", "invalid_request_error"))

    def do_POST(self) -> None:
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. timed out): nothing to say

    def _post(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if urlsplit(self.path).path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, _error_body(f"no route {self.path}", "invalid_request_error"))
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json(400, _error_body(f"invalid JSON body: {exc}", "invalid_request_error"))
            return
        if not isinstance(body, dict):
            self._send_json(400, _error_body("body must be a JSON object", "invalid_request_error"))
            return
        if self._refused(body):
            fake._admit(body, refused=True)
            return
        fault = fake._admit(body)
        if fault == "reset":
            self._reset()
            return
        if fault in _STATUS_ERRORS:
            status, kind, message = _STATUS_ERRORS[fault]
            headers = {"Retry-After": f"{fake.retry_after_s:g}"} if fault == "429" else {}
            self._send_json(status, _error_body(message, kind, code=fault), headers)
            return
        if fault == "hang":
            fake._stopping.wait(fake.hang_s)
        if fake.latency_s:
            fake._stopping.wait(fake.latency_s)
        if fault == "garbage_body":
            self._send_bytes(200, GARBAGE_BODY, "application/json")
            return
        try:
            completion = fake._completion(body, fault)
        except Exception as exc:  # a failing responder surfaces as a server error
            self._send_json(500, _error_body(f"responder failed: {exc!r}", "server_error"))
            return
        if body.get("stream"):
            self._send_stream(
                completion, bool((body.get("stream_options") or {}).get("include_usage"))
            )
            return
        self._send_json(200, completion)

    # --- responses -----------------------------------------------------------------------

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        self._send_bytes(status, json.dumps(payload).encode("utf-8"), "application/json", headers)

    def _send_bytes(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_stream(self, completion: dict[str, Any], include_usage: bool) -> None:
        """The completion as server-sent events: a chunk per word of each choice (a reply of
        tool calls: one chunk with them all), a final chunk with the finish reason, the usage if
        asked for, then `[DONE]`."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {k: completion[k] for k in ("id", "created", "model")}

        def event(payload: Any) -> None:
            data = f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n"
            raw = data.encode("utf-8")
            self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
            self.wfile.flush()
            if self.server.fake.chunk_delay_s:
                time.sleep(self.server.fake.chunk_delay_s)

        for choice in completion["choices"]:
            calls = choice["message"].get("tool_calls")
            if calls:  # one chunk with every call, each whole
                delta = {"role": "assistant", "content": choice["message"]["content"]}
                delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(calls)]
                event(
                    {
                        **base,
                        "object": "chat.completion.chunk",
                        "choices": [
                            {"index": choice["index"], "delta": delta, "finish_reason": None}
                        ],
                    }
                )
            words = (choice["message"]["content"] or "").split(" ") if not calls else []
            for i, word in enumerate(words):
                piece = word if i == 0 else " " + word
                delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
                event(
                    {
                        **base,
                        "object": "chat.completion.chunk",
                        "choices": [
                            {"index": choice["index"], "delta": delta, "finish_reason": None}
                        ],
                    }
                )
            event(
                {
                    **base,
                    "object": "chat.completion.chunk",
                    "choices": [
                        {
                            "index": choice["index"],
                            "delta": {},
                            "finish_reason": choice.get("finish_reason") or "stop",
                        }
                    ],
                }
            )
        if include_usage:
            event(
                {
                    **base,
                    "object": "chat.completion.chunk",
                    "choices": [],
                    "usage": completion["usage"],
                }
            )
        event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _reset(self) -> None:
        """Drop the connection with a TCP reset and no response at all."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
