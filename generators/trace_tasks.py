"""Tasks from production traces, built backwards from what production already showed.

- `trace_answer`: a trace the judge panel rated good. The prompt is the conversation up to the
  final reply; the observed reply is the reference, and the generator model distils rubric
  items from it. The verifier is the rubric judge (many replies are right, none word for word).
- `near_miss`: a trace rated bad. The generator model writes the reply that should have been
  given and rubric items, one naming the failure; the observed reply is kept as a negative the
  verifier must reject (the self-check proves it does).
- `tool_replay`: a good trace that called tools. The prompt is the request; the tools and the
  results recorded in production form the task's environment, replayed to the solver; the
  verifier checks the solver's calls (names and key arguments) against the observed ones.

The conversation is scrubbed already (`data.traces.ingest`); nothing here sees the original.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from data.lake import (
    Lineage,
    Message,
    RecordedCall,
    RubricSpec,
    SourceRef,
    Task,
    ToolCall,
    ToolCallsSpec,
    ToolEnvironment,
    ToolSpec,
    Trace,
    TraceMessage,
    VerifierSpec,
    seed_for,
)
from data.llm import LLMClient
from data.prompts import load_prompt, render_conversation
from generators.checks import CheckFailure, loose
from harnesses.tool_replay import attempt_text

VERSION = "1"
RUBRIC_PROMPT = load_prompt(__file__, "trace_rubric")
NEAR_MISS_PROMPT = load_prompt(__file__, "trace_near_miss")
MIN_ITEM_WORDS, MAX_ITEM_WORDS, MAX_ITEMS = 3, 40, 5
MAX_ANSWER_CHARS = 400  # bounds much longer than this overflow llama.cpp's grammar limits
Item = Annotated[str, Field(max_length=240)]
KEY_ARGUMENT_CHARS = 64  # longer strings (and any with spaces) are free text, not compared
ERROR_PREFIXES = ("error", "exception", "traceback", "failed", "failure")
ERROR_STATUSES = {"error", "failed", "failure", "exception"}


D = TypeVar("D", bound=BaseModel)


class RubricDraft(BaseModel):
    model_config = ConfigDict(extra="ignore")
    items: list[Item] = Field(min_length=1, max_length=8)


class NearMissDraft(BaseModel):
    model_config = ConfigDict(extra="ignore")
    answer: str = Field(min_length=1, max_length=MAX_ANSWER_CHARS)
    items: list[Item] = Field(min_length=1, max_length=8)


def prompt_of(messages: list[TraceMessage]) -> list[Message]:
    """Trace messages as a task's chat messages. Tool calls and their results are written into
    the assistant's message that made them (`[calls NAME ARGS]`, `[result] ...`): a bare `tool`
    message without the call it answers is refused by OpenAI-compatible servers."""
    prompt: list[Message] = []
    for m in messages:
        if m.role == "tool":
            result = f"[result] {m.content.strip()}"
            if prompt and prompt[-1].role == "assistant":
                previous = prompt.pop()
                result = f"{previous.content}\n{result}"
            prompt.append(Message(role="assistant", content=result))
            continue
        calls = [
            f"[calls {c.name} {json.dumps(c.arguments, ensure_ascii=False, sort_keys=True)}]"
            for c in m.tool_calls
        ]
        content = "\n".join(part for part in (m.content.strip(), *calls) if part)
        prompt.append(Message(role=m.role, content=content))
    return prompt


def check_items(items: list[str]) -> list[str]:
    """Rubric items stripped and deduplicated; raises CheckFailure when none is usable."""
    kept: dict[str, str] = {}
    for item in items:
        text = " ".join(item.split()).strip("-• ")
        if MIN_ITEM_WORDS <= len(text.split()) <= MAX_ITEM_WORDS and "{" not in text:
            kept.setdefault(loose(text), text)
    if not kept:
        raise CheckFailure("no_usable_rubric_item")
    return list(kept.values())[:MAX_ITEMS]


def _lineage(trace: Trace, generator: str, model: str, prompt_hash: str, **knobs: Any) -> Lineage:
    seed, _ = seed_for(generator, VERSION, trace.trace_id)
    return Lineage(
        generator=generator,
        generator_version=VERSION,
        prompt_hash=prompt_hash,
        model=model,
        seed=seed,
        knobs={
            "trace_format": trace.format,
            "turns": sum(m.role == "user" for m in trace.messages),
            "tool_calls": len(trace.tool_calls),
            **knobs,
        },
    )


def _task(
    kind: str,
    prompt: list[Message],
    answer: str,
    verifier: VerifierSpec,
    trace: Trace,
    lineage: Lineage,
    environment: ToolEnvironment | None = None,
) -> Task:
    return Task(
        task_id=Task.make_id(kind, prompt, answer, verifier, environment=environment),
        kind=kind,  # type: ignore[arg-type]
        prompt=prompt,
        answer=answer,
        verifier=verifier,
        evidence=[],
        source=[SourceRef(source_id=trace.trace_id, path=trace.origin, chunk_id="")],
        lineage=lineage,
        environment=environment,
    )


async def _draft(
    generator: str, trace: Trace, text: str, schema: type[D], llm: LLMClient, max_tokens: int
) -> D:
    """The generator model's reply to `text`, parsed into `schema` (seeded by the trace)."""
    _, seed = seed_for(generator, VERSION, trace.trace_id)
    return await llm.structured(
        "generator",
        [{"role": "user", "content": text}],
        schema,
        max_tokens=max_tokens,
        temperature=0.0,
        seed=seed,
    )


async def answer_task(trace: Trace, llm: LLMClient, max_tokens: int = 300) -> Task:
    """A reference task from a trace rated good: its reply and rubric items distilled from it."""
    if not trace.answer.strip():
        raise CheckFailure("no_final_text")
    text = RUBRIC_PROMPT.render(
        conversation=render_conversation(trace.messages[:-1]), answer=trace.answer
    )
    draft = await _draft("trace_answer", trace, text, RubricDraft, llm, max_tokens)
    verifier = RubricSpec(rubric=check_items(draft.items))
    lineage = _lineage(
        trace, "trace_answer", llm.model("generator"), RUBRIC_PROMPT.version, outcome="good"
    )
    return _task(
        "trace_answer", prompt_of(trace.messages[:-1]), trace.answer, verifier, trace, lineage
    )


async def near_miss_task(
    trace: Trace, failures: list[str], llm: LLMClient, max_tokens: int = 500
) -> Task:
    """A near-miss task from a trace rated bad: a corrected reply, rubric items naming the
    failure, and the observed reply as a negative."""
    failure = failures[0] if failures else "the reply did not serve the user"
    text = NEAR_MISS_PROMPT.render(
        failure=failure, conversation=render_conversation(trace.messages[:-1]), answer=trace.answer
    )
    draft = await _draft("near_miss", trace, text, NearMissDraft, llm, max_tokens)
    answer = draft.answer.strip()
    if loose(answer) == loose(trace.answer):
        raise CheckFailure("correction_repeats_failure")
    negatives = [trace.answer] if trace.answer.strip() else []
    verifier = RubricSpec(rubric=check_items(draft.items), negatives=negatives)
    lineage = _lineage(
        trace,
        "near_miss",
        llm.model("generator"),
        NEAR_MISS_PROMPT.version,
        outcome="bad",
        failure=failure[:200],
    )
    return _task("near_miss", prompt_of(trace.messages[:-1]), answer, verifier, trace, lineage)


# --- tool replay -------------------------------------------------------------------------


def recorded_calls(messages: list[TraceMessage]) -> list[RecordedCall]:
    """Each tool call in `messages` with the result it got (paired by call id, else the next
    unpaired tool message), in the order made."""
    results: dict[str, str] = {}
    unpaired: list[str] = []
    for m in messages:
        if m.role == "tool":
            if m.tool_call_id:
                results[m.tool_call_id] = m.content
            else:
                unpaired.append(m.content)
    recorded = []
    for call in (c for m in messages for c in m.tool_calls):
        result = results.get(call.call_id) if call.call_id else None
        if result is None and unpaired:
            result = unpaired.pop(0)
        recorded.append(RecordedCall(call=call, result=result if result is not None else ""))
    return recorded


def succeeded(recorded: RecordedCall) -> bool:
    """A call that got a result which does not report an error: a JSON object without an
    `error` (or `errors`) entry or an error status, or text that does not open with one."""
    text = recorded.result.strip()
    if not text:
        return False
    try:
        value = json.loads(text)
    except ValueError:
        return not text.lower().startswith(ERROR_PREFIXES)
    if isinstance(value, dict):
        status = str(value.get("status", "")).lower()
        return not (value.get("error") or value.get("errors") or status in ERROR_STATUSES)
    return True


def key_arguments(call: ToolCall, spec: ToolSpec | None) -> dict[str, Any]:
    """The arguments a replayed call must match: enums, numbers, booleans and identifier-like
    strings (no spaces, short); free text such as a reason or a message is left out."""
    properties = (spec.parameters.get("properties") or {}) if spec else {}
    return {
        name: value
        for name, value in call.arguments.items()
        if _is_key(value, properties.get(name))
    }


def _is_key(value: Any, declared: Any) -> bool:
    if isinstance(declared, dict) and "enum" in declared:
        return True
    if isinstance(value, bool | int | float):
        return True
    return isinstance(value, str) and 0 < len(value) <= KEY_ARGUMENT_CHARS and " " not in value


def derived_specs(calls: list[ToolCall]) -> list[ToolSpec]:
    """Tool specs from the calls alone, for traces that did not record the tools offered."""
    specs: dict[str, set[str]] = {}
    for call in calls:
        specs.setdefault(call.name, set()).update(call.arguments)
    return [
        ToolSpec(
            name=name, parameters={"type": "object", "properties": {a: {} for a in sorted(args)}}
        )
        for name, args in specs.items()
    ]


def replay_task(trace: Trace, model: str) -> Task:
    """A tool-replay task from a good trace whose tool calls after the last request all
    succeeded (calls made for earlier requests are history the prompt shows)."""
    last_user = max(i for i, m in enumerate(trace.messages) if m.role == "user")
    recorded = recorded_calls(trace.messages[last_user:])
    if not recorded:
        raise CheckFailure("no_tool_calls")
    if not all(succeeded(r) for r in recorded):
        raise CheckFailure("a_tool_call_failed")
    tools = list(trace.tools) or derived_specs([r.call for r in recorded])
    specs = {t.name: t for t in tools}
    recorded = [
        r.model_copy(update={"key_arguments": key_arguments(r.call, specs.get(r.call.name))})
        for r in recorded
    ]
    expected = [ToolCall(name=r.call.name, arguments=r.key_arguments) for r in recorded]
    prompt = prompt_of(trace.messages[: last_user + 1])
    verifier = ToolCallsSpec(tool_calls=expected)
    answer = attempt_text([r.call for r in recorded], trace.answer)
    environment = ToolEnvironment(tools=tools, recorded=recorded)
    lineage = _lineage(trace, "tool_replay", model, "", outcome="good")
    return _task("tool_replay", prompt, answer, verifier, trace, lineage, environment)
