"""What a model's reply is, as the LLM client hands it on: its text or texts, the tool calls
asked for, usage, and whether it came from the cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from data.lake import Usage


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call a model asked for (OpenAI tools API): its id, the tool, and the arguments
    as the JSON text the model wrote (not parsed: that may fail, and the caller says so)."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Reply:
    text: str
    usage: Usage
    cached: bool
    key: str = ""  # the cache key of the request that produced it
    rollout_id: str = ""  # the X-Rollout-Id the request carried, if any
    tool_calls: tuple[ToolCallRequest, ...] = ()  # with `tools`: the calls the model asked for


class Completion(NamedTuple):
    """One request's outcome: each choice's text and tool calls, usage, cache hit, cache key."""

    texts: list[str]
    usage: Usage
    cached: bool
    key: str
    tool_calls: list[list[ToolCallRequest]]
