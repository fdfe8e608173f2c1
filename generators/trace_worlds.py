"""Worlds from production traces: the tools a group of traces called, as a simulated world.

`observe` groups ingested (scrubbed) traces by the tools they offer and keeps each trace's
answered calls in order; `draft_spec` (`generators.trace_world_draft`) builds a first world
spec from those calls alone, with no model; `write_spec` asks the generator model for a better
one, shown the tools, the calls with their recorded results, the draft and, on a refinement
round, what replaying the previous spec got wrong. A spec is judged by replaying the calls
against it (`judges.world_fidelity`).
"""

from __future__ import annotations

import asyncio
import json

from pydantic import ValidationError

from data.lake import ToolSpec, Trace, content_id, seed_for
from data.llm import LLMClient, LLMError
from data.prompts import chat_messages, load_prompt
from generators.trace_tasks import recorded_calls
from generators.trace_world_sql import (
    inferred_parameters,
)
from harnesses.observed_calls import (
    Observation,
    ObservedCall,
    json_kind,
)
from harnesses.world import WorldSpec

GENERATOR = "trace_world"
VERSION = "1"
WORLD_PROMPT = load_prompt(__file__, "trace_world")
SYSTEM_PROMPT = load_prompt(__file__, "trace_world_system")
MAX_EXAMPLE_CALLS = 40  # recorded calls shown to the generator model
MAX_RESULT_CHARS = 400  # a recorded result shown to it is cut to this
MAX_FEEDBACK_CHARS = 4000


def observe(traces: list[Trace]) -> list[Observation]:
    """The traces with at least one answered tool call, grouped by the tools they offer (and
    any they called without offering them). Calls are paired with the tool messages answering
    them by call id (by position where a format records no ids, as `recorded_calls` does); a
    call without a result is left out. Largest groups first, then by key."""
    groups: dict[tuple[str, ...], list[tuple[Trace, list[ObservedCall]]]] = {}
    unique = {trace.trace_id: trace for trace in traces}
    for trace_id in sorted(unique):
        trace = unique[trace_id]
        calls = [
            ObservedCall(r.call.name, dict(r.call.arguments), r.result, trace_id)
            for r in recorded_calls(trace.messages)
            if r.result.strip()
        ]
        if calls:
            names = {tool.name for tool in trace.tools} | {call.name for call in calls}
            groups.setdefault(tuple(sorted(names)), []).append((trace, calls))
    observations = [_observation(names, members) for names, members in groups.items()]
    return sorted(observations, key=lambda o: (-len(o.trace_ids), o.key))


def _observation(
    names: tuple[str, ...], members: list[tuple[Trace, list[ObservedCall]]]
) -> Observation:
    offered: dict[str, ToolSpec] = {}
    for trace, _ in members:
        for tool in trace.tools:
            offered.setdefault(tool.name, tool)
    sequences = [calls for _, calls in members]
    called = [call for calls in sequences for call in calls]
    tools = [
        offered.get(name)
        or ToolSpec(
            name=name, parameters=inferred_parameters([c for c in called if c.name == name])
        )
        for name in names
    ]
    return Observation(
        key=content_id("trace_world_tools", list(names)),
        tools=tools,
        sequences=sequences,
        trace_ids=[trace.trace_id for trace, _ in members],
    )


# --- the generator model's spec ------------------------------------------------------------


async def write_spec(
    observation: Observation,
    draft: WorldSpec,
    client: LLMClient,
    feedback: str = "",
    *,
    max_tokens: int = 4096,
    repairs: int = 1,
) -> WorldSpec:
    """The generator model's world spec for the observation, shown the tools, the recorded
    calls, the draft and `feedback` (a fidelity report's mismatches, on a refinement round).
    The reply is plain JSON (a world spec's free-form parts fit no grammar); one that is not a
    valid spec is shown its error and asked again `repairs` times, then raises LLMError
    "invalid_world_spec". The spec keeps the draft's name."""
    text = WORLD_PROMPT.render(
        name=draft.name,
        tools="\n".join(
            json.dumps(t.model_dump(mode="json"), ensure_ascii=False) for t in observation.tools
        ),
        calls=_examples(observation),
        draft=json.dumps(draft.model_dump(mode="json", exclude_defaults=True), ensure_ascii=False),
        feedback=feedback.strip()[:MAX_FEEDBACK_CHARS] or "(none: this is the first round)",
    )
    _, seed = seed_for(GENERATOR, VERSION, observation.key, draft.world_id, feedback)
    conversation = chat_messages(SYSTEM_PROMPT, text)
    error = ""
    for _ in range(repairs + 1):
        reply = await client.chat(
            "generator",
            conversation,
            temperature=0.0,
            max_tokens=max_tokens,
            seed=seed,
            response_format={"type": "json_object"},
        )
        try:
            return _parsed_spec(reply.text, draft.name)
        except ValueError as exc:  # invalid JSON or an invalid spec
            error = _spec_error(exc)
        if client.cache and reply.key:
            await asyncio.to_thread(client.cache.forget, reply.key)  # never replay garbage
        conversation = [
            *conversation,
            {"role": "assistant", "content": reply.text},
            {
                "role": "user",
                "content": f"That is not a valid world spec: {error}. Reply again with only the"
                " corrected world spec as one JSON object.",
            },
        ]
    raise LLMError("invalid_world_spec", error)


def _examples(observation: Observation) -> str:
    """The recorded calls, trace by trace: `name {arguments} -> result` (results cut)."""
    lines: list[str] = []
    shown = 0
    for number, calls in enumerate(observation.sequences, 1):
        if shown >= MAX_EXAMPLE_CALLS:
            break
        lines.append(f"trace {number}:")
        for call in calls[: MAX_EXAMPLE_CALLS - shown]:
            arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
            lines.append(f"  {call.name} {arguments} -> {call.result.strip()[:MAX_RESULT_CHARS]}")
            shown += 1
    return "\n".join(lines)


def _parsed_spec(text: str, name: str) -> WorldSpec:
    # strict=False: raw newlines inside strings (multi-line SQL) are a common, harmless quirk
    raw = json.loads(text, strict=False)
    if not isinstance(raw, dict):
        raise ValueError(f"the reply is a JSON {json_kind(raw)}, not an object")
    return WorldSpec.model_validate({**raw, "name": name})


def _spec_error(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON: {exc.msg} at char {exc.pos}"
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "spec"
        return f"{where}: {first.get('msg', 'invalid')}"[:300]
    return str(exc)[:300]
