"""A scripted fake LLM: the real LLMClient with only its network seam (`_request`) replaced."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from data.lake import Usage
from data.llm import Completion, Endpoint, LLMClient, ToolCallRequest
from judges.controls import deciding_judges


class ToolCalls(list[ToolCallRequest]):
    """A scripted reply that asks for these tool calls (and has no text)."""


Responder = Callable[[str, list[dict[str, Any]], dict[str, Any]], str | list[str] | ToolCalls]


def fake_endpoints(
    base_url: str, model: str = "scripted", judges: int = 1, **overrides: Any
) -> dict[str, Endpoint]:
    """Endpoints for every role (`generator`, `judge:0..`, `solver`) on one server."""
    roles = ["generator", *(f"judge:{i}" for i in range(judges)), "solver"]
    settings = {
        "max_concurrency": 4,
        "timeout_s": 5.0,
        "max_retries": 0,
        "structured_output": "json_schema",
        "supports_n": False,
        **overrides,
    }
    return {
        r: Endpoint(role=r, base_url=base_url, api_key="k", model=model, **settings) for r in roles
    }


class ScriptedLLM(LLMClient):
    """Answers from `respond(role, messages, params)`; records every request it was sent."""

    def __init__(self, respond: Responder, judges: int = 1, roles: Sequence[str] = ()) -> None:
        endpoints = fake_endpoints("scripted://", judges=judges)
        if roles:
            endpoints = {r: e for r, e in endpoints.items() if r in roles}
        super().__init__(endpoints, cache=None)
        self.respond = respond
        self.requests: list[tuple[str, list[dict[str, str]], dict[str, Any]]] = []
        self.rollouts: list[str] = []

    async def _request(self, role, messages, params, rollout_id=""):
        self.endpoint(role)
        self.requests.append((role, messages, params))
        self.rollouts.append(rollout_id)
        out = self.respond(role, messages, params)
        if isinstance(out, ToolCalls):  # a reply asking for tool calls
            return Completion([""], Usage(prompt_tokens=10, completion_tokens=5), False, "", [out])
        texts = out if isinstance(out, list) else [out]
        usage = Usage(prompt_tokens=10, completion_tokens=5)
        return Completion(texts, usage, False, "", [[] for _ in texts])


def below_the_bar(llm: LLMClient) -> LLMClient:
    """`llm` as the stage runner hands it to a stage after every judge failed its control
    items (`judges.controls.deciding_judges`)."""
    failed = [{"role": r, "model": llm.model(r), "competent": False} for r in llm.judge_roles]
    llm.endpoints, _ = deciding_judges(llm.endpoints, failed)
    return llm
