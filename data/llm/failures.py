"""How a failed model call is read: the funnel's reason for it, whether asking again may
succeed (408, 409, 429, a 5xx that is not a refusal of the request itself), the server's own
words, and how long to wait before the next try (its `Retry-After`, else backoff with jitter)."""

from __future__ import annotations

import random
import re
import time
from email.utils import parsedate_to_datetime
from typing import Any

import openai

TRANSIENT_STATUSES = frozenset({408, 409, 429})  # and every 5xx that is not a refusal


# A 5xx whose message says the request itself was refused (llama.cpp's server answers 500 with
# pydantic's "Input should be 'text' or 'json_object'", its C++ server answers `tools` with
# "tools param requires --jinja flag"): the same request fails again.
REFUSAL_MESSAGE = re.compile(
    r"input should be|validation error|not supported|unsupported|extra inputs are not permitted"
    r"|requires --\w",
    re.IGNORECASE,
)


# A refusal that names the response format: the server takes another one down the ladder.
FORMAT_REFUSAL = re.compile(r"response_format|json|schema|grammar|input should be", re.I)


BACKOFF_S = (0.5, 8.0)  # first retry's delay, the cap; doubled each time, with jitter


MAX_RETRY_AFTER_S = 60.0


def failure_reason(exc: openai.APIError | ValueError) -> str:
    """The funnel's reason for a request that failed with `exc` (after any retries)."""
    if isinstance(exc, openai.APIStatusError):
        return f"http_{exc.status_code}"
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection_error"
    return "bad_response"  # an answer that is not a completion (or not JSON at all)


def is_transient(exc: openai.APIStatusError) -> bool:
    """Whether asking again may succeed: 408/409/429, or a 5xx that is not a refusal."""
    if exc.status_code in TRANSIENT_STATUSES:
        return True
    return exc.status_code >= 500 and not REFUSAL_MESSAGE.search(server_message(exc))


def server_message(exc: openai.APIStatusError) -> str:
    """The server's own words: the error body's message, else the SDK's summary."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)[:500]
    return str(exc)[:500]


def retry_after(response: Any) -> float | None:
    """The delay a `Retry-After` (seconds or an HTTP date) or `retry-after-ms` header asks."""
    headers = response.headers
    try:
        if headers.get("retry-after-ms"):
            return min(float(headers["retry-after-ms"]) / 1000, MAX_RETRY_AFTER_S)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            seconds = float(value)
        except ValueError:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def backoff_s(attempt: int) -> float:
    """Exponential backoff with jitter: about 0.5, 1, 2, 4, 8 s."""
    first, cap = BACKOFF_S
    return min(cap, first * 2**attempt) * random.uniform(0.75, 1.0)
