"""The tool-calling solver on a simulated world (OpenAI tools API).

The solver gets the task's instruction and the world's tools, and acts on its own copy of the
world at the task's initial snapshot. Each turn is one model call (under the attempt's rollout
id, so the recording proxy holds the trajectory). A reply with tool calls has each call run on
the world and its result sent back as a tool message; a call whose arguments are not JSON is
told so. A reply without tool calls is the final answer. When the turns run out the attempt
ends without an answer, with the state as it is. Scoring is the task's verifier on the final
state (`harnesses.world_check.passes`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from data.llm import LLMClient, Reply, ToolCallRequest, settle
from data.prompts import load_prompt
from data.records import Task, ToolCall, Usage
from harnesses.episode import TURN_SEED_STRIDE
from harnesses.tool_replay import attempt_text
from harnesses.world import Snapshot, World, WorldSpec, world_spec

NAME = "world_tools"
SYSTEM = load_prompt(__file__, "world_agent_system")


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


@dataclass(frozen=True)
class WorldTools:
    """The calibration harness for tool-use tasks: each attempt runs `solve` on the task's
    world through the OpenAI tools API (the solver endpoint is the recording proxy, so every
    turn is kept under the attempt's rollout id); a reply's text is the attempt
    (`WorldAttempt.text`), which the world verifier replays."""

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
        """One attempt per rollout id, each on its own copy of the world."""
        if task.world is None:
            raise ValueError(f"task {task.task_id} has no world to act on")
        spec, setup = world_spec(task), task.world
        prompt = [m.model_dump() for m in task.prompt]

        async def one(rollout: str, attempt_seed: int) -> Reply:
            done = await solve(
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
