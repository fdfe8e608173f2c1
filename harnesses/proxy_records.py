"""What the interception proxy keeps of each call: the call record, scrubbed of secrets and
personal data before it is stored (`scrubbed_call`), a streamed reply assembled back into one
completion (`StreamAssembler`), and the recorder that buffers calls (a retry replaces its
earlier attempt) and writes them to the lake as shards (`CallRecorder`)."""

from __future__ import annotations

import json
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from data.lake import Lake, ProxyCall, content_id
from data.scrub import Scrubber

REMEMBERED_CALLS = 100_000  # recent calls whose retries are still matched up


class CallRecorder:
    """Buffers proxy calls (a retry replaces its earlier attempt) and writes them as shards."""

    def __init__(
        self,
        lake: Lake,
        run_id: str,
        flush_every_s: float = 1.0,
        scrubber: Scrubber | None = None,
    ) -> None:
        self.lake = lake
        self.run_id = run_id
        self.flush_every_s = flush_every_s
        self.scrubber = scrubber
        self._buffer: dict[str, ProxyCall] = {}
        self._occurrences: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._latest_retry: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="proxy-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def call_id(self, rollout: str, body_hash: str, retry: int) -> str:
        """The record id of a request: an SDK retry (retry count > 0) of a body already seen in
        this rollout shares the latest such request's id; any other request is a new call,
        even with an identical body (sampling the same prompt twice is two calls)."""
        key = (rollout, body_hash)
        with self._lock:
            seen = self._occurrences.get(key, 0)
            occurrence = seen if retry > 0 and seen else seen + 1
            self._occurrences[key] = occurrence
            self._occurrences.move_to_end(key)
            if len(self._occurrences) > REMEMBERED_CALLS:
                self._occurrences.popitem(last=False)
        return content_id(self.run_id, rollout, body_hash, occurrence)

    def add(self, call: ProxyCall) -> None:
        """Buffer `call`, unless a later retry of the same call was already recorded (an
        abandoned attempt that the upstream answered late never replaces the retry). The call
        is scrubbed when it is written (`flush`, on the recorder's thread): a large request
        never holds up the event loop that serves the others."""
        with self._lock:
            if self._latest_retry.get(call.call_id, -1) > call.retry:
                return
            self._latest_retry[call.call_id] = call.retry
            self._latest_retry.move_to_end(call.call_id)
            if len(self._latest_retry) > REMEMBERED_CALLS:
                self._latest_retry.popitem(last=False)
            self._buffer[call.call_id] = call

    def flush(self) -> int:
        """Write what is buffered as one shard; returns how many calls it held."""
        with self._lock:
            calls, self._buffer = list(self._buffer.values()), {}
        if self.scrubber is not None:
            calls = [scrubbed_call(call, self.scrubber) for call in calls]
        self.lake.write("proxy_calls", calls, self.run_id)
        return len(calls)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.flush_every_s):
            self.flush()


def scrubbed_call(call: ProxyCall, scrubber: Scrubber) -> ProxyCall:
    """The call with its messages, settings, response and error scrubbed."""
    counts: Counter = Counter()

    def clean(text: str) -> str:
        try:
            value = json.loads(text)
        except ValueError:
            return scrubber.scrub(text, counts)
        return json.dumps(scrubber.scrub_value(value, counts), ensure_ascii=False, sort_keys=True)

    return call.model_copy(
        update={
            "messages": clean(call.messages),
            "params": clean(call.params),
            "response": clean(call.response),
            "error": scrubber.scrub(call.error, counts),
            "rollout_id": scrubber.scrub(call.rollout_id, counts),
        }
    )


@dataclass
class StreamAssembler:
    """Rebuilds the choices of a chat completion from its server-sent-event chunks."""

    model: str = ""
    choices: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # events that could not be read
    done: bool = False  # the stream's `[DONE]` event has been read
    _pending: bytes = b""

    def feed(self, data: bytes) -> None:
        self._pending += data.replace(b"\r\n", b"\n")
        *events, self._pending = self._pending.split(b"\n\n")
        for event in events:
            self._event(event)

    def finish(self) -> None:
        """Read what is left when the stream ends without a closing blank line."""
        if self._pending.strip():
            self._event(self._pending)
        self._pending = b""

    def _event(self, event: bytes) -> None:
        for line in event.decode("utf-8", "replace").splitlines():
            payload = line[5:].strip() if line.startswith("data:") else ""
            self.done = self.done or payload == "[DONE]"
            if payload in ("", "[DONE]"):
                continue
            try:
                chunk = json.loads(payload)
                if not isinstance(chunk, dict):
                    raise ValueError("not a JSON object")
                self._chunk(chunk)
            except (ValueError, TypeError, AttributeError) as exc:
                self.problems.append(f"unreadable stream event ({exc}): {payload[:80]}")

    def _chunk(self, chunk: dict[str, Any]) -> None:
        self.model = chunk.get("model") or self.model
        self.usage = chunk.get("usage") or self.usage
        for part in chunk.get("choices") or []:
            choice = self.choices.setdefault(
                part.get("index", 0),
                {"index": part.get("index", 0), "message": {"role": "assistant", "content": ""}},
            )
            delta = part.get("delta") or {}
            message = choice["message"]
            message["content"] += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                calls = message.setdefault("tool_calls", [])
                while len(calls) <= call.get("index", 0):
                    calls.append(
                        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                    )
                target = calls[call.get("index", 0)]
                target["id"] = call.get("id") or target["id"]
                function = call.get("function") or {}
                target["function"]["name"] += function.get("name") or ""
                target["function"]["arguments"] += function.get("arguments") or ""
            if part.get("finish_reason"):
                choice["finish_reason"] = part["finish_reason"]

    def response(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "choices": [self.choices[i] for i in sorted(self.choices)],
            "usage": self.usage,
        }
