"""Training episodes as recording-proxy records, so training rollouts become traces.

TRL generates in-process, so its calls never cross the HTTP proxy; the recorder writes what the
proxy would have: one `proxy_calls` record per model turn of each episode (the messages sent,
the tools offered, the reply with its tool calls), under one rollout id per episode, through the
proxy's own `CallRecorder` (`harnesses.proxy_records`). `foundry ingest traces
HOME/lake/proxy_calls` reads them back as conversations (the last turn of a rollout holds the
whole episode).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from data.lake import Lake, ProxyCall, content_id, utcnow
from harnesses.proxy_records import CallRecorder
from harnesses.train_environments import tool_schemas


def openai_messages(messages: list[dict[str, Any]], turn: str) -> list[dict[str, Any]]:
    """TRL's messages in the OpenAI chat format: tool calls get ids (`<turn>-<n>`) and their
    arguments as JSON text, and each tool message the id of the call it answers, in order."""
    converted: list[dict[str, Any]] = []
    pending: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role", "assistant")
        out: dict[str, Any] = {"role": role, "content": _text(message.get("content"))}
        calls = message.get("tool_calls") or []
        if calls:
            out["tool_calls"] = []
            for n, call in enumerate(calls):
                function = call.get("function", call)
                arguments = function.get("arguments", {})
                call_id = f"{turn}-{index}-{n}"
                pending.append(call_id)
                out["tool_calls"].append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": str(function.get("name", "")),
                            "arguments": arguments
                            if isinstance(arguments, str)
                            else json.dumps(arguments, ensure_ascii=False),
                        },
                    }
                )
        if role == "tool":
            if pending:
                out["tool_call_id"] = pending.pop(0)
            if message.get("name"):
                out["name"] = str(message["name"])
        converted.append(out)
    return converted


def episode_calls(
    prompt: list[dict[str, Any]],
    completion: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    model: str,
    run_id: str,
    rollout_id: str,
) -> list[ProxyCall]:
    """One record per assistant turn of an episode: what was sent before it, and it."""
    messages = openai_messages([*prompt, *completion], rollout_id)
    started = utcnow()
    records = []
    for index in range(len(prompt), len(messages)):
        reply = messages[index]
        if reply["role"] != "assistant":
            continue
        finish = "tool_calls" if reply.get("tool_calls") else "stop"
        choice = {"index": 0, "message": reply, "finish_reason": finish}
        records.append(
            ProxyCall(
                call_id=content_id(run_id, rollout_id, index),
                rollout_id=rollout_id,
                started_at=started,
                model=model,
                messages=json.dumps(messages[:index], ensure_ascii=False),
                params=json.dumps({"tools": tools}, ensure_ascii=False) if tools else "{}",
                response=json.dumps([choice], ensure_ascii=False),
                finish_reason=finish,
                prompt_tokens=0,  # TRL counts tokens per completion, not per turn
                completion_tokens=0,
                latency_s=0.0,
                status=200,
                error="",
                stream=False,
                retry=0,
            )
        )
    return records


class EpisodeRecorder:
    """Records every episode a reward function is shown, as proxy records in `lake`."""

    def __init__(self, lake: Lake, run_id: str, model: str) -> None:
        self.lake = lake
        self.run_id = run_id
        self.model = model
        self.batches = 0
        self.episodes = 0  # episodes recorded
        self._schemas: dict[type, list[dict[str, Any]]] = {}

    def wrap(self, func: Callable[..., list]) -> Callable[..., list]:
        """`func`, recording each batch of episodes it scores first."""

        def recorded(prompts: list[Any], completions: list[Any], **columns: Any) -> list:
            self.record(prompts, completions, columns)
            return func(prompts, completions, **columns)

        recorded.__name__ = func.__name__
        return recorded

    def record(self, prompts: list[Any], completions: list[Any], columns: dict[str, Any]) -> None:
        state = columns.get("trainer_state")
        step = state.global_step if state is not None else 0
        environments = columns.get("environments") or [None] * len(prompts)
        recorder = CallRecorder(self.lake, self.run_id)
        for index, (prompt, completion, environment) in enumerate(
            zip(prompts, completions, environments, strict=True)
        ):
            if isinstance(prompt, str) or isinstance(completion, str):
                continue  # a plain-text row is no chat episode
            rollout = f"{self.run_id}-{step}-{self.batches}-{index}"
            for call in episode_calls(
                prompt, completion, self._tools(environment), self.model, self.run_id, rollout
            ):
                recorder.add(call)
            self.episodes += 1
        self.batches += 1
        recorder.flush()

    def _tools(self, environment: Any) -> list[dict[str, Any]]:
        if environment is None:
            return []
        kind = type(environment)
        if kind not in self._schemas:
            self._schemas[kind] = tool_schemas(kind)
        return self._schemas[kind]


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)
