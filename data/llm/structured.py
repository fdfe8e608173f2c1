"""Structured output: the response format each mode asks a server for (a JSON schema, a JSON
object, or the schema in the instructions), the mode each (server, model) has shown it takes
(stepping down when it refuses one), and a schema's JSON made once per class."""

from __future__ import annotations

import copy
import functools
import json
import sys
import threading
from typing import Any

from pydantic import BaseModel, ValidationError

from data.llm.endpoints import STRUCTURED_MODES, Endpoint, StructuredMode

Messages = list[dict[str, Any]]


class StructuredModes:
    """The structured-output mode each (server, model) takes, for the whole process: it starts
    at the endpoint's and moves down `STRUCTURED_MODES` when the server refuses one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._learned: dict[tuple[str, str], StructuredMode] = {}

    def current(self, endpoint: Endpoint) -> StructuredMode:
        learned = self._learned.get((endpoint.server, endpoint.model))
        start = endpoint.structured_output
        if learned is None or STRUCTURED_MODES.index(learned) < STRUCTURED_MODES.index(start):
            return start
        return learned

    def step_down(self, endpoint: Endpoint, refused: StructuredMode, why: str) -> bool:
        """Move past `refused`; False when there is no mode below it."""
        index = STRUCTURED_MODES.index(refused)
        if index + 1 == len(STRUCTURED_MODES):
            return False
        with self._lock:
            key = (endpoint.server, endpoint.model)
            if STRUCTURED_MODES.index(self.current(endpoint)) <= index:
                self._learned[key] = STRUCTURED_MODES[index + 1]
                print(
                    f"model server {endpoint.server} ({endpoint.model}) refused structured"
                    f" output as {refused} ({why[:120]}); asking as {self._learned[key]}",
                    file=sys.stderr,
                    flush=True,
                )
        return True


LEARNED_MODES = StructuredModes()


def format_for(mode: StructuredMode, schema: type[BaseModel]) -> dict[str, Any] | None:
    """The `response_format` of `mode` for `schema`."""
    json_schema = copy.deepcopy(schema_of(schema))
    if mode == "json_schema":
        json_schema["additionalProperties"] = False  # strict mode requires it
        return {
            "type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": json_schema, "strict": True},
        }
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": json_schema}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def with_schema_instruction(messages: Messages, schema: type[BaseModel]) -> Messages:
    """`messages` with the schema spelled out at the end, for servers that take no format."""
    instruction = "Reply with only a JSON object that matches this JSON schema: " + json.dumps(
        schema_of(schema)
    )
    return [*messages, {"role": "user", "content": instruction}]


def short_validation_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "reply"
    return f"{where}: {first.get('msg', 'invalid')}"[:200]


@functools.cache
def schema_of(schema: type[BaseModel]) -> dict[str, Any]:
    """`schema`'s JSON schema, made once per class (pydantic takes about 0.5 ms a time); callers
    copy it before changing it."""
    return schema.model_json_schema()
