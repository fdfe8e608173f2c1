"""Run by tests/test_world_package.py with the verifiers virtualenv's Python: loads an exported
v1 taskset package through the verifiers library, and for each world task grades the given
completions (turns of tool calls and replies, built as the verifiers messages a rollout's trace
holds) with the package's reward, and runs the gold calls through the package's world tool
server. Prints one JSON line: rewards per task key and case, and the tool results.

Usage: python verifiers_world_check.py TASKSET_ID CASES_JSON
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.graph import MessageNode
from verifiers.v1.state import state_cls


def trace_of(task: vf.Task, turns: list[dict[str, Any]]) -> vf.Trace:
    """A finished episode: the task's prompt, then each turn's tool calls (with a tool message
    per call) or reply, as sampled assistant messages."""
    trace = vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        state=state_cls(type(task))(),
        agent=vf.AgentInfo(config=vf.AgentConfig(), name="check", trainable=False),
    )
    for message in task.data.prompt:
        trace.nodes.append(MessageNode(message=message))
    for index, turn in enumerate(turns):
        calls = [
            vf.ToolCall(id=f"call-{index}-{n}", name=name, arguments=json.dumps(arguments))
            for n, (name, arguments) in enumerate(turn.get("calls", []))
        ]
        message = vf.AssistantMessage(content=turn.get("reply"), tool_calls=calls or None)
        trace.nodes.append(MessageNode(message=message, sampled=True))
        for call in calls:
            trace.nodes.append(
                MessageNode(message=vf.ToolMessage(tool_call_id=call.id, content="{}"))
            )
    return trace


async def tool_results(task: vf.Task, calls: list[list[Any]]) -> list[list[Any]]:
    """The gold calls run through the package's world tool server: (is_error, text) each."""
    (toolset,) = type(task).toolsets(task.config)
    await toolset.setup_task(task.data)
    listed = [tool.name for tool in await toolset.list_tools()]
    results = [[listed]]
    for name, arguments in calls:
        result = await toolset.call_tool(name, arguments)
        results.append([result.is_error, result.content[0].text])
    return results


async def check(taskset_id: str, cases_json: str) -> dict:
    cases = json.loads(Path(cases_json).read_text())
    env = vf.load_environment(vf.resolve_env_config({"taskset": {"id": taskset_id}}))
    figures: dict[str, Any] = {"rewards": {}, "tools": {}, "validated": {}}
    for task in env.taskset:
        if task.key not in cases:
            continue
        figures["validated"][task.key] = await task.validate(None)
        rewards = figures["rewards"][task.key] = {}
        for name, turns in cases[task.key].items():
            trace = trace_of(task, turns)
            await task.score(trace)
            rewards[name] = trace.reward
        gold = [call for turn in cases[task.key]["gold"] for call in turn.get("calls", [])]
        figures["tools"][task.key] = await tool_results(task, gold)
    return figures


if __name__ == "__main__":
    print(json.dumps(asyncio.run(check(sys.argv[1], sys.argv[2]))))
