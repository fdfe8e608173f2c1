"""The tool-calling solver on a simulated world, in one of two environments.

The solver gets the task's instruction and the world's tools, and acts on its own copy of the
world at the task's initial snapshot. Each turn is one model call (under the attempt's rollout
id, so the recording proxy holds the trajectory). How it calls a tool is the environment:

- `world_tools` (`solve`): the OpenAI tools API. A reply with tool calls has each call run on
  the world and its result sent back as a tool message; a call whose arguments are not JSON is
  told so. A reply without tool calls is the final answer.
- `world_actions` (`solve_with_actions`), for servers that return no native tool calls
  (llama.cpp's): each reply is one JSON action (`action_schema`), a call of one of the world's
  tools or the final answer; the tools are described in the system message, a call's result
  comes back as the next user message, and an unusable reply is told so and costs its turn.

When the turns run out the attempt ends without an answer, with the state as it is. Both give
the same attempt text for the same calls (`WorldAttempt.text`), which the world verifier
replays. `environment_for` picks the environment for a solver endpoint.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from data.config import WorldProtocol
from data.lake import Task, ToolCall, Usage
from data.llm import Endpoint, LLMClient, Reply, ToolCallRequest, settle
from data.prompts import load_prompt
from harnesses.episode import TURN_SEED_STRIDE, Episode
from harnesses.tool_replay import attempt_text
from harnesses.world import Snapshot, World, WorldSpec, world_spec

NAME = "world_tools"  # native tool calls
ACTIONS_NAME = "world_actions"  # one JSON action per turn
SYSTEM = load_prompt(__file__, "world_agent_system")
ACTIONS_SYSTEM = load_prompt(__file__, "world_actions_system")
FINAL = "answer"  # the JSON action that ends the attempt
ANSWER_CHARS = 400  # longer bounds overflow llama.cpp grammars
ARGUMENT_CHARS = 200  # a text argument's bound, where its tool sets none lower
ACTION_EXAMPLE = '{"tool": ..., "arguments": {...}} or {"tool": "answer", "answer": ...}'


@dataclass
class WorldAttempt:
    """What an attempt did: the calls made (name, arguments text, result), its final answer
    (empty when the turns ran out) and the final state."""

    calls: list[tuple[str, str, str]] = field(default_factory=list)
    answer: str = ""
    final: Snapshot = field(default_factory=dict)
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = True

    def text(self) -> str:
        """The attempt as the world verifier reads it: the calls that ran (a call whose
        arguments were not a JSON object ran nothing) and the final answer."""
        made = []
        for name, arguments, _ in self.calls:
            try:
                parsed = json.loads(arguments or "{}")
            except json.JSONDecodeError:
                continue
            if isinstance(parsed, dict):  # other JSON was refused by the world: it ran nothing
                made.append(ToolCall(name=name, arguments=parsed))
        return attempt_text(made, self.answer)


def opening(spec: WorldSpec, instruction: str) -> list[dict[str, str]]:
    """A tool-use task's prompt: the world's system message, then the user's instruction."""
    return [
        {"role": "system", "content": SYSTEM.render(world_description=spec.description)},
        {"role": "user", "content": instruction},
    ]


async def solve(
    llm: LLMClient,
    spec: WorldSpec,
    initial: Snapshot,
    prompt: list[dict[str, str]],
    *,
    rollout_id: str,
    max_turns: int,
    temperature: float,
    max_tokens: int,
    seed: int,
) -> WorldAttempt:
    """One attempt at the task `prompt` asks (see `opening`) on a fresh copy of the world at
    `initial`."""
    world = World(spec, initial)
    attempt = WorldAttempt()
    messages: list[dict] = [dict(m) for m in prompt]
    try:
        while attempt.turns < max_turns:
            reply = await llm.chat(
                "solver",
                messages,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed + attempt.turns * TURN_SEED_STRIDE,
                rollout_id=rollout_id,
                tools=spec.openai_tools(),
            )
            attempt.turns += 1
            attempt.prompt_tokens += reply.usage.prompt_tokens
            attempt.completion_tokens += reply.usage.completion_tokens
            attempt.cached = attempt.cached and reply.cached
            if not reply.tool_calls:
                attempt.answer = reply.text.strip()
                break
            messages.append(_assistant(reply.text, reply.tool_calls))
            for call in reply.tool_calls:
                result = _run(world, call)
                attempt.calls.append((call.name, call.arguments, result))
                messages.append({"role": "tool", "tool_call_id": call.call_id, "content": result})
        attempt.final = world.snapshot()
        return attempt
    finally:
        world.close()


def _run(world: World, call: ToolCallRequest) -> str:
    """The tool message for `call`: the world's result, or why the call could not run."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        return json.dumps({"error": f"arguments are not JSON: {exc.msg}"})
    return world.call(call.name, arguments).message()


def _assistant(text: str, calls: tuple[ToolCallRequest, ...]) -> dict:
    """The assistant turn that asked for `calls`, as the OpenAI API expects it back."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ],
    }


def environment_for(solver: Endpoint, protocol: WorldProtocol = "auto") -> str:
    """The environment world tasks are attempted in with `solver`: `world_tools` (native tool
    calls) or `world_actions` (JSON actions), as `protocol` says; `auto`: native tool calls
    where the solver's server returns them."""
    if protocol == "auto":
        return NAME if solver.tool_calls else ACTIONS_NAME
    return NAME if protocol == "tools" else ACTIONS_NAME


def action_schema(spec: WorldSpec) -> type[BaseModel]:
    """The JSON action on `spec`'s world: `{"tool": <one of its tools>, "arguments": {...}}`,
    with the arguments one of the tools' argument objects, or `{"tool": "answer", "answer":
    ...}`. The tool's own schema checks its arguments when the world runs the call."""
    shapes = [(tool.name, _argument_shape(tool.parameters)) for tool in spec.tools]
    return _action_schema(json.dumps(shapes, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _action_schema(shapes_json: str) -> type[BaseModel]:
    shapes: dict[str, Any] = dict(json.loads(shapes_json))
    if FINAL in shapes:
        raise ValueError(f"a world tool is named {FINAL!r}, the JSON actions' final action")

    distinct = dict.fromkeys(json.dumps(shape, sort_keys=True) for shape in shapes.values())

    def one_of_the_tools(schema: dict[str, Any]) -> None:  # the arguments' schema, replaced
        schema.clear()
        schema["anyOf"] = [json.loads(shape) for shape in distinct]

    arguments = Field(default_factory=dict, json_schema_extra=one_of_the_tools)
    return create_model(
        "WorldAction",
        __config__=ConfigDict(extra="forbid"),
        tool=(Literal[(*shapes, FINAL)], ...),
        arguments=(dict[str, Any], arguments),
        answer=(str, Field(default="", max_length=ANSWER_CHARS)),
    )


def _argument_shape(parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool's arguments as a JSON action may give them: its properties with their types
    (and enums) alone, which every structured-output backend can enforce, text bounded, the
    required ones required, other properties only where the tool takes them."""
    properties = {
        name: _argument_type(schema)
        for name, schema in (parameters.get("properties") or {}).items()
        if isinstance(schema, dict)
    }
    shape: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": [name for name in parameters.get("required") or [] if name in properties],
    }
    if parameters.get("additionalProperties") is False:
        shape["additionalProperties"] = False
    return shape


def _argument_type(schema: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in schema.items() if k in ("type", "enum")}
    if kept.get("type") == "string" and "enum" not in kept:
        kept["maxLength"] = min(schema.get("maxLength", ARGUMENT_CHARS), ARGUMENT_CHARS)
    return kept


def describe_tools(spec: WorldSpec) -> str:
    """The world's tools for the JSON-action system message: name, description, arguments."""
    lines = []
    for tool in spec.tools:
        arguments = json.dumps(tool.parameters.get("properties") or {}, sort_keys=True)
        required = ", ".join(tool.parameters.get("required") or []) or "none"
        description = " ".join(tool.description.split()) or "(no description)"
        lines.append(f"- {tool.name}: {description} Arguments: {arguments}; required: {required}")
    return "\n".join(lines)


def actions_opening(spec: WorldSpec, prompt: list[dict[str, str]]) -> list[dict[str, str]]:
    """The task's prompt (see `opening`) with the JSON-action protocol and the world's tools
    after its system message."""
    protocol = ACTIONS_SYSTEM.render(tools=describe_tools(spec)).strip()
    messages = [dict(m) for m in prompt]
    if messages and messages[0]["role"] == "system":
        first = messages.pop(0)["content"].strip()
        return [{"role": "system", "content": f"{first}\n\n{protocol}"}, *messages]
    return [{"role": "system", "content": protocol}, *messages]


async def solve_with_actions(
    llm: LLMClient,
    spec: WorldSpec,
    initial: Snapshot,
    prompt: list[dict[str, str]],
    *,
    rollout_id: str,
    max_turns: int,
    temperature: float,
    max_tokens: int,
    seed: int,
) -> WorldAttempt:
    """`solve` for servers without native tool calls: one attempt with one JSON action a turn
    (`action_schema`) on a fresh copy of the world at `initial`."""
    schema = action_schema(spec)
    episode = Episode(llm, actions_opening(spec, prompt), rollout_id, temperature, max_tokens, seed)
    world = World(spec, initial)
    attempt = WorldAttempt()
    try:
        while episode.turns < max_turns:
            action: Any = await episode.act(schema, ACTION_EXAMPLE)
            if action is None:
                continue
            if action.tool == FINAL:
                attempt.answer = action.answer.strip()
                break
            result = world.call(action.tool, action.arguments).message()
            arguments = json.dumps(action.arguments, ensure_ascii=False)
            attempt.calls.append((action.tool, arguments, result))
            episode.tell(f"Result: {result}")
        attempt.final = world.snapshot()
    finally:
        world.close()
    attempt.turns, attempt.cached = episode.turns, episode.cached
    attempt.prompt_tokens = episode.prompt_tokens
    attempt.completion_tokens = episode.completion_tokens
    return attempt


SOLVERS = {NAME: solve, ACTIONS_NAME: solve_with_actions}


@dataclass(frozen=True)
class WorldTools:
    """The calibration harness for tool-use tasks, named for its environment: each attempt runs
    `solve` (`world_tools`, native tool calls) or `solve_with_actions` (`world_actions`) on the
    task's world (the solver endpoint is the recording proxy, so every turn is kept under the
    attempt's rollout id); a reply's text is the attempt (`WorldAttempt.text`), which the world
    verifier replays."""

    name: str = NAME

    def __post_init__(self) -> None:
        if self.name not in SOLVERS:
            raise ValueError(f"no world environment {self.name!r}; known: {sorted(SOLVERS)}")

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
        """One attempt per rollout id, each on its own copy of the world."""
        if task.world is None:
            raise ValueError(f"task {task.task_id} has no world to act on")
        spec, setup = world_spec(task), task.world
        prompt = [m.model_dump() for m in task.prompt]

        async def one(rollout: str, attempt_seed: int) -> Reply:
            done = await SOLVERS[self.name](
                llm,
                spec,
                setup.initial,
                prompt,
                rollout_id=rollout,
                max_turns=setup.max_turns,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=attempt_seed,
            )
            usage = Usage(
                prompt_tokens=done.prompt_tokens, completion_tokens=done.completion_tokens
            )
            return Reply(done.text(), usage, done.cached, rollout_id=rollout)

        return await settle([one(r, seed + i) for i, r in enumerate(rollout_ids)])
