"""Trace readers: production exchanges from three formats into one conversation shape.

- OpenAI-style JSONL: one exchange per line, `messages` (or `request.messages`, `body.messages`)
  plus the response as a chat completion, a batch-output `{"body": ...}`, a message or a
  string; or `messages` ending in the assistant's answer. Tools from `tools`.
- OpenTelemetry GenAI spans as JSON (an OTLP export, one per line or one per file, or bare
  spans): `gen_ai.input.messages` / `gen_ai.output.messages` / `gen_ai.system_instructions` /
  `gen_ai.tool.definitions` (the current conventions) or the indexed `gen_ai.prompt.N.*` /
  `gen_ai.completion.N.*` attributes. The last chat span of a trace holds its whole history.
- The interception proxy's own records (`proxy_calls` parquet shards): the last successful call
  of each rollout, plus its response.

Nothing here scrubs: the ingestion step does, before anything is stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pyarrow.parquet as pq

from data.readers import BINARY_SNIFF_BYTES, Rejected, regular_file

MAX_RECORD_BYTES = 16_000_000  # a JSONL line, or a whole .json file, larger than this is refused
MAX_DEPTH = 64  # deeper JSON is refused: the scrubber and the records walk it recursively
SKIP_BYTES = 1 << 20  # an overlong line is skipped in reads of this size, never held whole
PROXY_COLUMNS = {"rollout_id", "messages", "response", "status", "started_at", "model"}
CHAT_OPERATIONS = {"chat", "text_completion", "generate_content"}


@dataclass
class Conversation:
    """One exchange as read: OpenAI-shaped message dicts (unscrubbed) and tool definitions."""

    origin: str
    format: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    occurred_at: datetime | None = None  # when the exchange happened, where the format says


@dataclass(frozen=True)
class Malformed:
    """An input that yields no conversation, and why."""

    origin: str
    reason: str
    detail: str = ""


class Unreadable(ValueError):
    """Raised inside the readers; becomes a `Malformed` with `reason`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


Item = Conversation | Malformed
T = TypeVar("T")


def discover(paths: list[str]) -> list[Path]:
    """Trace files under `paths` (files or folders): .jsonl, .ndjson, .json, .parquet.

    Folders are walked without following symlinked folders; any other entry with a trace
    suffix is listed, so that a FIFO or a link loop gets its reason from `read_file`."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(
                p
                for p in path.rglob("*")
                if not p.is_dir() and p.suffix in (".jsonl", ".ndjson", ".json", ".parquet")
            )
        else:
            found.append(path)
    return found


def units(paths: list[str]) -> list[tuple[str, list[Path]]]:
    """What to read together, named: each JSON(L) file alone, and the parquet shards of one
    folder as one set (a rollout's calls are spread over the proxy's shards)."""
    found: dict[str, list[Path]] = {}
    for path in discover(paths):
        name = str(path.parent) if path.suffix == ".parquet" else str(path)
        found.setdefault(name, []).append(path)
    return sorted(found.items())


def read_unit(files: list[Path], max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[Item]:
    """The conversations of one unit (see `units`)."""
    if files[0].suffix == ".parquet":
        yield from read_proxy_records(files)
    else:
        yield from read_file(files[0], max_record_bytes)


def read_file(path: Path, max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[Item]:
    """Every conversation in `path`, and a `Malformed` for each line (or file) that is not.

    The file is read a line at a time: an undecodable line or one over `max_record_bytes`
    is refused on its own (the overlong one without ever being held whole), and the rest of
    the file is still read. A file that is not a regular file, or starts with NUL bytes, is
    refused as a whole."""
    info = regular_file(path)
    if isinstance(info, Rejected):
        yield Malformed(str(path), info.reason, info.detail)
        return
    if path.suffix == ".parquet":
        yield from read_proxy_records([path])
        return
    try:
        with path.open("rb") as handle:
            if b"\x00" in handle.read(BINARY_SNIFF_BYTES):
                yield Malformed(str(path), "binary", "NUL bytes in content")
                return
            handle.seek(0)
            if path.suffix != ".json":
                yield from _documents(str(path), _lines(str(path), handle, max_record_bytes))
            elif info.st_size > max_record_bytes:
                detail = f"{info.st_size} bytes > {max_record_bytes}"
                yield Malformed(str(path), "too_large", detail)
            else:
                yield from _documents(str(path), [_decoded(str(path), handle.read())])
    except OSError as exc:
        yield Malformed(str(path), "unreadable_file", str(exc))


def _lines(name: str, handle: Any, limit: int) -> Iterator[tuple[str, str] | Malformed]:
    """The non-blank lines of a binary file handle as `(origin, text)`, or a `Malformed` for
    a line over `limit` bytes (skipped in bounded reads) or not UTF-8."""
    for number, line in enumerate(iter(lambda: handle.readline(limit + 1), b""), 1):
        origin = f"{name}:{number}"
        if len(line) > limit and not line.endswith(b"\n"):
            size = len(line) + _skip_line(handle)
            yield Malformed(origin, "too_large", f"line of {size} bytes > {limit}")
        elif line.strip():
            yield _decoded(origin, line)


def _skip_line(handle: Any) -> int:
    """Read past the rest of the current line; returns how many bytes that was."""
    skipped = 0
    while chunk := handle.readline(SKIP_BYTES):
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return skipped


def _decoded(origin: str, raw: bytes) -> tuple[str, str] | Malformed:
    try:
        return origin, raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return Malformed(origin, "undecodable", f"not UTF-8 at byte {exc.start}")


def _documents(name: str, documents: Iterable[tuple[str, str] | Malformed]) -> Iterator[Item]:
    spans: list[tuple[str, dict[str, Any]]] = []
    proxy_rows: list[dict[str, Any]] = []
    for entry in documents:
        if isinstance(entry, Malformed):
            yield entry
            continue
        origin, raw = entry
        try:
            document = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            yield Malformed(origin, "invalid_json", str(exc) or type(exc).__name__)
            continue
        if _depth(document) > MAX_DEPTH:
            yield Malformed(origin, "too_deep", f"JSON nested deeper than {MAX_DEPTH} levels")
            continue
        if isinstance(document, dict) and set(document) >= PROXY_COLUMNS:
            proxy_rows.append(document)
            continue
        found = guarded(origin, lambda document=document: otel_spans(document))
        if isinstance(found, Malformed):
            yield found
        elif found is None:
            yield guarded(origin, lambda d=document, o=origin: openai_exchange(d, o))
        else:
            chat = [s for s in found if guarded(origin, lambda s=s: _is_chat_span(s)) is True]
            if chat:
                spans += [(origin, s) for s in chat]
            else:
                yield Malformed(origin, "no_genai_spans", f"{len(found)} spans, none a chat span")
    yield from _span_traces(name, spans)
    yield from proxy_rollouts(proxy_rows, name)


def _depth(value: Any) -> int:
    """How deeply `value`'s lists and objects nest (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            children = node.values() if isinstance(node, dict) else node
            stack += [(child, depth + 1) for child in children]
    return deepest


def guarded(origin: str, read: Callable[[], T]) -> T | Malformed:
    """`read()`, or a `Malformed` saying why it could not read `origin`: its own reason when
    a check failed, `malformed_record` when the input broke the reader in a way no check
    foresaw (a string where an object belongs, a missing key)."""
    try:
        return read()
    except Unreadable as exc:
        return Malformed(origin, exc.reason, exc.detail)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
        return Malformed(origin, "malformed_record", f"{type(exc).__name__}: {exc}"[:300])


# --- OpenAI-style exchanges --------------------------------------------------------------


def openai_exchange(document: Any, origin: str) -> Conversation:
    """One OpenAI-style exchange (see the module docstring for the shapes read)."""
    if not isinstance(document, dict):
        raise Unreadable("not_an_object", type(document).__name__)
    request = document.get("request") or document.get("body") or document
    if not isinstance(request, dict) or "messages" not in request:
        raise Unreadable("unrecognised_format", f"keys: {sorted(document)[:8]}")
    messages = [openai_message(m) for m in _list(request["messages"], "messages")]
    response = document.get("response", document.get("completion"))
    if response is not None:
        messages.append(_response_message(response))
    model = str(
        document.get("model")
        or request.get("model")
        or (response.get("model") if isinstance(response, dict) else "")
        or ""
    )
    tools = _tool_definitions(request.get("tools") or document.get("tools") or [])
    when = moment(_first_time(document, request, response))
    return checked(Conversation(origin, "openai", model, messages, tools, when))


def _first_time(document: dict[str, Any], request: dict[str, Any], response: Any) -> Any:
    """The exchange's time as a format gives it: a `timestamp`, `created_at` or `created` field
    of the line or its request, else the chat completion's `created` (also inside a batch
    output's `body`)."""
    completion = response if isinstance(response, dict) else {}
    body = completion.get("body") if isinstance(completion.get("body"), dict) else {}
    for holder in (document, request, completion, body):
        for key in ("timestamp", "created_at", "created"):
            if holder.get(key) not in (None, ""):
                return holder[key]
    return None


def moment(value: Any) -> datetime | None:
    """`value` (a datetime, ISO 8601 text, or Unix time in s, ms, µs or ns) as an aware
    datetime; None when it is none of those (an exchange then has no known time)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and not value.strip().lstrip("-").replace(".", "", 1).isdigit():
        try:
            return moment(datetime.fromisoformat(value.strip()))
        except ValueError:
            return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    for threshold, scale in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3)):  # ns, µs, ms
        if abs(number) >= threshold:
            number /= scale
            break
    try:
        return datetime.fromtimestamp(number, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _response_message(response: Any) -> dict[str, Any]:
    if isinstance(response, str):
        return {"role": "assistant", "content": response, "tool_calls": [], "tool_call_id": ""}
    if not isinstance(response, dict):
        raise Unreadable("bad_response", type(response).__name__)
    if isinstance(response.get("body"), dict):  # batch output: {"status_code": .., "body": ..}
        response = response["body"]
    if "choices" in response:
        choices = _list(response["choices"], "choices")
        if not choices or not isinstance(choices[0], dict):
            raise Unreadable("bad_response", "no choices")
        return openai_message(choices[0].get("message") or {})
    return openai_message(response)


def openai_message(raw: Any) -> dict[str, Any]:
    """An OpenAI chat message (content as a string or as parts) in the common shape."""
    if not isinstance(raw, dict):
        raise Unreadable("bad_message", f"a message is a {type(raw).__name__}")
    role = raw.get("role")
    if role == "developer":
        role = "system"
    if role == "function":
        role = "tool"
    if role not in ("system", "user", "assistant", "tool"):
        raise Unreadable("bad_message", f"role {role!r}")
    calls = [_openai_call(c) for c in raw.get("tool_calls") or []]
    if raw.get("function_call"):
        calls.append(_openai_call({"function": raw["function_call"]}))
    return {
        "role": role,
        "content": _text(raw.get("content")),
        "tool_calls": calls,
        # a legacy `function` result names the function, not the call: it pairs by position
        "tool_call_id": str(raw.get("tool_call_id") or "") if role == "tool" else "",
    }


def _openai_call(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise Unreadable("bad_tool_call", type(raw).__name__)
    function = raw.get("function") or raw
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise Unreadable("bad_tool_call", "a tool call without a name")
    return {
        "name": name,
        "arguments": arguments_of(function.get("arguments")),
        "call_id": str(raw.get("id") or ""),
    }


def arguments_of(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict: JSON text is parsed; anything else is kept whole."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {"_raw": raw}
        return parsed if isinstance(parsed, dict) else {"_value": parsed}
    return {"_value": raw}


def _tool_definitions(raw: Any) -> list[dict[str, Any]]:
    """Function tools; built-in tools without a name (e.g. `web_search_preview`) are left
    out: a replay has nothing to call them by."""
    tools = []
    for tool in _list(raw, "tools"):
        if not isinstance(tool, dict):
            raise Unreadable("bad_tool_definition", type(tool).__name__)
        function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        name = function.get("name")
        if not isinstance(name, str) or not name:
            continue
        parameters = function.get("parameters")
        tools.append(
            {
                "name": name,
                "description": str(function.get("description") or ""),
                "parameters": parameters if isinstance(parameters, dict) else {},
            }
        )
    return tools


def _text(content: Any) -> str:
    """Message content as text: a string, or the text of its parts (other parts dropped)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p if isinstance(p, str) else str(p.get("text") or p.get("content") or "")
            for p in content
            if isinstance(p, str) or (isinstance(p, dict) and p.get("type", "text") == "text")
        ]
        return "\n".join(p for p in parts if p)
    raise Unreadable("bad_message", f"content is a {type(content).__name__}")


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise Unreadable("bad_messages", f"{what} is a {type(value).__name__}, not a list")
    return value


def checked(conversation: Conversation) -> Conversation:
    """The conversation if it holds a user request and ends in the assistant's turn."""
    messages = conversation.messages
    if not any(m["role"] == "user" and m["content"].strip() for m in messages):
        raise Unreadable("no_user_message")
    last = messages[-1]
    if last["role"] != "assistant" or not (last["content"].strip() or last["tool_calls"]):
        raise Unreadable("no_final_answer", f"the last message is from {last['role']}")
    return conversation


# --- OpenTelemetry GenAI spans -----------------------------------------------------------


def otel_spans(document: Any) -> list[dict[str, Any]] | None:
    """The spans of an OTLP JSON export, a `{"spans": …}` object, a list of spans or one span;
    None when `document` is none of these."""
    if isinstance(document, dict) and "resourceSpans" in document:
        return [
            span
            for resource in document.get("resourceSpans") or []
            for scope in resource.get("scopeSpans")
            or resource.get("instrumentationLibrarySpans")
            or []
            for span in scope.get("spans") or []
            if isinstance(span, dict)
        ]
    if isinstance(document, dict) and isinstance(document.get("spans"), list):
        return [s for s in document["spans"] if isinstance(s, dict)]
    if isinstance(document, list) and document and all(_looks_like_span(s) for s in document):
        return document
    if _looks_like_span(document):
        return [document]
    return None


def _looks_like_span(value: Any) -> bool:
    return (
        isinstance(value, dict) and "attributes" in value and ("name" in value or "spanId" in value)
    )


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    """A span's attributes as a plain dict, from OTLP's key/value list or already a dict."""
    raw = span.get("attributes") or {}
    if isinstance(raw, dict):
        return raw
    return {a["key"]: _otlp_value(a.get("value") or {}) for a in raw if isinstance(a, dict)}


def _otlp_value(value: dict[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if "arrayValue" in value:
        return [_otlp_value(v) for v in value["arrayValue"].get("values") or []]
    if "kvlistValue" in value:
        return {
            kv["key"]: _otlp_value(kv.get("value") or {})
            for kv in value["kvlistValue"].get("values") or []
        }
    return None


def _is_chat_span(span: dict[str, Any]) -> bool:
    attrs = attributes(span)
    if attrs.get("gen_ai.operation.name") in CHAT_OPERATIONS:
        return True
    return any(k == "gen_ai.input.messages" or k.startswith("gen_ai.prompt.") for k in attrs)


def _span_traces(name: str, spans: list[tuple[str, dict[str, Any]]]) -> Iterator[Item]:
    """One conversation per trace id: its last chat span (by end time) holds the history."""
    last: dict[str, tuple[str, dict[str, Any]]] = {}
    for origin, span in spans:
        context = span.get("context") if isinstance(span.get("context"), dict) else {}
        key = str(span.get("traceId") or context.get("trace_id") or origin)
        if key not in last or _end(span) >= _end(last[key][1]):
            last[key] = (origin, span)
    for key, (origin, span) in last.items():
        where = f"{name}#{key}" if key != origin else origin
        yield guarded(where, lambda span=span, where=where: span_conversation(span, where))


def _end(span: dict[str, Any]) -> int:
    value = span.get("endTimeUnixNano") or span.get("end_time") or 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def span_conversation(span: dict[str, Any], origin: str) -> Conversation:
    """The conversation a GenAI chat span recorded."""
    attrs = attributes(span)
    if "gen_ai.input.messages" in attrs:
        messages = _system_instructions(attrs.get("gen_ai.system_instructions"))
        messages += [
            m for raw in _json_list(attrs["gen_ai.input.messages"]) for m in _parts_message(raw)
        ]
        output = _json_list(attrs.get("gen_ai.output.messages") or [])
        messages += [m for raw in output[:1] for m in _parts_message(raw)]
    else:
        messages = _indexed(attrs, "gen_ai.prompt") + _indexed(attrs, "gen_ai.completion")[:1]
    tools = _tool_definitions(_json_list(attrs.get("gen_ai.tool.definitions") or []))
    model = str(attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model") or "")
    when = moment(span.get("startTimeUnixNano") or span.get("start_time"))
    return checked(Conversation(origin, "otel", model, messages, tools, when))


def _json_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise Unreadable("bad_genai_attribute", str(exc)) from exc
    return _list(value, "a gen_ai messages attribute")


def _system_instructions(value: Any) -> list[dict[str, Any]]:
    if not value:
        return []
    parts: list[Any] = [{"type": "text", "content": value}]
    if not isinstance(value, str):
        parts = _list(value, "gen_ai.system_instructions")
    elif value.lstrip().startswith("["):  # JSON parts, or text such as "[Persona] ..."
        try:
            parsed = json.loads(value)
            parts = parsed if isinstance(parsed, list) else parts
        except ValueError:
            pass
    text = "\n".join(str(p.get("content") or "") for p in parts if isinstance(p, dict))
    return (
        [{"role": "system", "content": text, "tool_calls": [], "tool_call_id": ""}] if text else []
    )


def _parts_message(raw: Any) -> list[dict[str, Any]]:
    """A message of the GenAI conventions (`role` + typed `parts`) in the common shape; a
    message of tool responses becomes one tool message per response."""
    if not isinstance(raw, dict) or "role" not in raw:
        raise Unreadable("bad_message", "a gen_ai message without a role")
    parts = [p for p in raw.get("parts") or [] if isinstance(p, dict)]
    responses = [p for p in parts if p.get("type") == "tool_call_response"]
    if responses:
        return [
            {
                "role": "tool",
                "content": _response_text(p.get("response")),
                "tool_calls": [],
                "tool_call_id": str(p.get("id") or ""),
            }
            for p in responses
        ]
    calls = [
        {
            "name": str(p.get("name") or ""),
            "arguments": arguments_of(p.get("arguments")),
            "call_id": str(p.get("id") or ""),
        }
        for p in parts
        if p.get("type") == "tool_call" and p.get("name")
    ]
    text = "\n".join(str(p.get("content") or "") for p in parts if p.get("type") == "text")
    return [openai_message({"role": raw["role"], "content": text}) | {"tool_calls": calls}]


def _response_text(response: Any) -> str:
    return response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Messages from `prefix.N.role` / `.content` / `.tool_calls.M.*` / `.tool_call_id`."""
    messages = []
    index = 0
    while f"{prefix}.{index}.role" in attrs or f"{prefix}.{index}.content" in attrs:
        key = f"{prefix}.{index}"
        calls = []
        call = 0
        while f"{key}.tool_calls.{call}.name" in attrs:
            calls.append(
                {
                    "name": str(attrs[f"{key}.tool_calls.{call}.name"]),
                    "arguments": arguments_of(attrs.get(f"{key}.tool_calls.{call}.arguments")),
                    "call_id": str(attrs.get(f"{key}.tool_calls.{call}.id") or ""),
                }
            )
            call += 1
        message = openai_message(
            {
                "role": attrs.get(f"{key}.role") or "assistant",
                "content": attrs.get(f"{key}.content"),
                "tool_call_id": attrs.get(f"{key}.tool_call_id"),
            }
        )
        messages.append(message | {"tool_calls": calls})
        index += 1
    return messages


# --- the interception proxy's records ----------------------------------------------------


def read_proxy_records(files: list[Path]) -> Iterator[Item]:
    """The rollouts recorded in proxy shards (parquet files of the `proxy_calls` table)."""
    rows: list[dict[str, Any]] = []
    for path in sorted(files):
        try:
            table = pq.read_table(path)
        except (OSError, ValueError) as exc:
            yield Malformed(str(path), "unreadable_file", str(exc))
            continue
        missing = PROXY_COLUMNS - set(table.column_names)
        if missing:
            yield Malformed(str(path), "not_proxy_records", f"missing {sorted(missing)}")
            continue
        rows += table.to_pylist()
    yield from proxy_rollouts(rows, str(files[0].parent) if files else "")


def proxy_rollouts(rows: list[dict[str, Any]], name: str) -> Iterator[Item]:
    """Conversations from proxy records (parquet rows or their JSON lines). An SDK retry
    shares its call id: the row with the highest retry count (of those, the one read last) is
    the call's outcome. Within a rollout, a call continues a conversation when it resends that
    conversation's last call; otherwise it starts another (a rollout id taken
    from an API key's hash holds every exchange made with that key). Each conversation ends
    with its last successful call."""
    calls: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        key = str(row.get("call_id") or i)
        if key not in calls or _int(row.get("retry")) >= _int(calls[key].get("retry")):
            calls[key] = row
    rollouts: dict[str, list[dict[str, Any]]] = {}
    for row in calls.values():
        rollouts.setdefault(str(row["rollout_id"]), []).append(row)
    for rollout, group in sorted(rollouts.items()):
        origin = f"{name}#{rollout}"
        done = sorted((r for r in group if r["status"] == 200), key=lambda r: str(r["started_at"]))
        if not done:
            yield Malformed(origin, "no_successful_call", f"{len(group)} calls, none answered 200")
            continue
        threads = guarded(origin, lambda done=done: _threads(done))
        if isinstance(threads, Malformed):
            yield threads
            continue
        for n, thread in enumerate(threads):
            where = origin if n == 0 else f"{origin}#{n}"
            yield guarded(
                where, lambda last=thread[-1], where=where: _proxy_conversation(last, where)
            )


def _threads(calls: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Calls (in time order) grouped into conversations: a call joins the thread whose last
    call's messages its own messages start with (an agent resends the history, with its own
    version of the model's answer, so the answer itself is not compared)."""
    threads: list[tuple[list[tuple[str, str]], list[dict[str, Any]]]] = []
    for call in calls:
        sent = _turns(json.loads(call["messages"]))
        for index, (seen, members) in enumerate(threads):
            if sent[: len(seen)] == seen:
                threads[index] = (sent, [*members, call])
                break
        else:
            threads.append((sent, [call]))
    return [members for _, members in threads]


def _turns(messages: list[Any]) -> list[tuple[str, str]]:
    return [(str(m.get("role")), _text(m.get("content"))) for m in messages if isinstance(m, dict)]


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _proxy_conversation(row: dict[str, Any], origin: str) -> Conversation:
    try:
        messages = json.loads(row["messages"])
        choices = json.loads(row["response"])
        params = json.loads(row.get("params") or "{}")
    except (TypeError, ValueError) as exc:
        raise Unreadable("bad_proxy_record", str(exc)) from exc
    tools = params.get("tools") if isinstance(params, dict) else None
    body = {"messages": messages, "tools": tools or [], "model": row["model"]}
    conversation = openai_exchange(body | {"response": {"choices": choices}}, origin)
    conversation.format = "proxy"
    conversation.occurred_at = moment(row["started_at"])
    return conversation
