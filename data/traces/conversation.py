"""A production trace read as a conversation (`Conversation`, or `Malformed` saying why not),
and the OpenAI-style exchange (request messages, tools and response) that the other formats
are read into: every reader of `data.traces.formats` builds on these."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

MAX_DEPTH = 64  # deeper JSON is refused: the scrubber and the records walk it recursively


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


def nesting_depth(value: Any) -> int:
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


def openai_exchange(document: Any, origin: str) -> Conversation:
    """One OpenAI-style exchange (see the module docstring for the shapes read)."""
    if not isinstance(document, dict):
        raise Unreadable("not_an_object", type(document).__name__)
    request = document.get("request") or document.get("body") or document
    if not isinstance(request, dict) or "messages" not in request:
        raise Unreadable("unrecognised_format", f"keys: {sorted(document)[:8]}")
    messages = [openai_message(m) for m in as_list(request["messages"], "messages")]
    response = document.get("response", document.get("completion"))
    if response is not None:
        messages.append(_response_message(response))
    model = str(
        document.get("model")
        or request.get("model")
        or (response.get("model") if isinstance(response, dict) else "")
        or ""
    )
    tools = tool_definitions(request.get("tools") or document.get("tools") or [])
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
        choices = as_list(response["choices"], "choices")
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
        "content": content_text(raw.get("content")),
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


def tool_definitions(raw: Any) -> list[dict[str, Any]]:
    """Function tools; built-in tools without a name (e.g. `web_search_preview`) are left
    out: a replay has nothing to call them by."""
    tools = []
    for tool in as_list(raw, "tools"):
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


def content_text(content: Any) -> str:
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


def as_list(value: Any, what: str) -> list[Any]:
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
