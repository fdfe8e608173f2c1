"""OpenTelemetry GenAI spans read as conversations: an OTLP JSON export, a `{"spans": …}`
object, a list of spans or one span; each chat span's messages, tools and response."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from data.traces.conversation import (
    Conversation,
    Item,
    Unreadable,
    arguments_of,
    as_list,
    checked,
    guarded,
    moment,
    openai_message,
    tool_definitions,
)

CHAT_OPERATIONS = {"chat", "text_completion", "generate_content"}


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


def is_chat_span(span: dict[str, Any]) -> bool:
    attrs = attributes(span)
    if attrs.get("gen_ai.operation.name") in CHAT_OPERATIONS:
        return True
    return any(k == "gen_ai.input.messages" or k.startswith("gen_ai.prompt.") for k in attrs)


def span_traces(name: str, spans: list[tuple[str, dict[str, Any]]]) -> Iterator[Item]:
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
    tools = tool_definitions(_json_list(attrs.get("gen_ai.tool.definitions") or []))
    model = str(attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model") or "")
    when = moment(span.get("startTimeUnixNano") or span.get("start_time"))
    return checked(Conversation(origin, "otel", model, messages, tools, when))


def _json_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise Unreadable("bad_genai_attribute", str(exc)) from exc
    return as_list(value, "a gen_ai messages attribute")


def _system_instructions(value: Any) -> list[dict[str, Any]]:
    if not value:
        return []
    parts: list[Any] = [{"type": "text", "content": value}]
    if not isinstance(value, str):
        parts = as_list(value, "gen_ai.system_instructions")
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
