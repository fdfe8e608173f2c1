"""The tool-replay harness: the solver calls the tools a production trace used, and gets the
results recorded in production.

Each turn the solver replies with one JSON action: a tool call `{"tool", "arguments"}` or the
final `{"tool": "answer", "answer"}`. A call that repeats a recorded call (same tool, same key
arguments) gets that call's recorded result; any other call is told that production has no
result for it (a replay cannot run the real tool). An unusable reply is told so and costs its
turn. The attempt is the calls made and the final answer, as JSON (`attempt_text`), which the
tool-call verifier scores. Every turn is one model call under the attempt's rollout id. Which
recorded result a call gets is `data.runtime.replay_runtime`'s, as in the exported verifiers
package.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from data.lake import Task, ToolCall, ToolEnvironment
from data.llm import LLMClient, Reply, settle
from data.prompts import load_prompt
from data.runtime import replay_runtime
from data.runtime.replay_runtime import EXTRA_TURNS, NO_RESULT, same_value
from harnesses.episode import Episode

NAME = "tool_replay"
SYSTEM = load_prompt(__file__, "tool_replay_system")
__all__ = [  # the replay runtime's own names, as callers of this harness know them
    "EXTRA_TURNS",
    "NO_RESULT",
    "NAME",
    "ToolAction",
    "ToolReplay",
    "attempt_text",
    "describe_tools",
    "repeats",
    "replay",
    "same_value",
]


class ToolAction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: str = Field(min_length=1, max_length=64)
    arguments: dict[str, Any] = Field(default_factory=dict)
    answer: str = Field(default="", max_length=400)  # longer bounds overflow llama.cpp grammars


def repeats(call: ToolCall, name: str, key_arguments: dict[str, Any]) -> bool:
    """Whether `call` is a call of `name` with every one of `key_arguments`."""
    return replay_runtime.repeats((call.name, call.arguments), name, key_arguments)


def attempt_text(calls: list[ToolCall], answer: str = "") -> str:
    """An attempt as JSON: the calls made, in order, and the final answer."""
    made = [{"name": c.name, "arguments": c.arguments} for c in calls]
    return json.dumps({"calls": made, "answer": answer}, ensure_ascii=False, sort_keys=True)


def replay(environment: ToolEnvironment, call: ToolCall, used: set[int]) -> str:
    """The recorded result for `call` (`data.runtime.replay_runtime.replay`: among the recorded
    calls it repeats, the one it matches on most arguments, a call not yet replayed before one that
    was, the earliest on a tie), `NO_RESULT` when it repeats none. `used` collects the replayed
    indexes of this episode."""
    recorded = environment.model_dump()["recorded"]
    return replay_runtime.replay(recorded, (call.name, call.arguments), used)


def describe_tools(environment: ToolEnvironment) -> str:
    lines = []
    for tool in environment.tools:
        parameters = json.dumps(tool.parameters.get("properties") or {}, sort_keys=True)
        lines.append(f"- {tool.name}: {tool.description or '(no description)'} {parameters}")
    return "\n".join(lines)


@dataclass(frozen=True)
class ToolReplay:
    turn_max_tokens: int = 160
    name: str = field(default=NAME)

    async def attempt(
        self,
        task: Task,
        llm: LLMClient,
        rollout_ids: list[str],
        *,
        temperature: float,
        max_tokens: int,
        seed: int,
    ) -> list[Reply]:
        """One replayed episode per rollout id; each reply's text is `attempt_text`."""
        if task.environment is None:
            raise ValueError(f"task {task.task_id} has no tool environment to replay")
        return await settle(
            [
                self._episode(task, task.environment, llm, rollout, temperature, seed + i)
                for i, rollout in enumerate(rollout_ids)
            ]
        )

    async def _episode(
        self,
        task: Task,
        environment: ToolEnvironment,
        llm: LLMClient,
        rollout: str,
        temperature: float,
        seed: int,
    ) -> Reply:
        episode = Episode(
            llm, _opening(task, environment), rollout, temperature, self.turn_max_tokens, seed
        )
        calls: list[ToolCall] = []
        used: set[int] = set()
        for _ in range(len(environment.recorded) + EXTRA_TURNS):
            action = await episode.act(ToolAction, '{"tool": ..., "arguments": {...}}')
            if action is None:
                continue
            if action.tool == "answer":
                return episode.reply(attempt_text(calls, action.answer))
            call = ToolCall(name=action.tool, arguments=action.arguments)
            calls.append(call)
            episode.tell(f"Result: {replay(environment, call, used)}")
        return episode.reply(attempt_text(calls))


def _opening(task: Task, environment: ToolEnvironment) -> list[dict[str, str]]:
    """The harness's instructions and the tools, then the task's own system message."""
    instructions = SYSTEM.render(tools=describe_tools(environment)).strip()
    messages = [m.model_dump() for m in task.prompt]
    if messages and messages[0]["role"] == "system":
        instructions += "\n\n" + messages.pop(0)["content"]
    return [{"role": "system", "content": instructions}, *messages]
