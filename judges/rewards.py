"""Scoring an answer against the gold, and what a trainer's reward function reads from its
batch: the specs, gold answers, completions and prompts of the taskset's own columns (the reward
functions themselves are the verifier registry's, `judges.verifier_types.trainer_rewards`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from data.lake import (
    VERIFIER_SPEC,
    AnswerSpec,
    Attempt,
    Lineage,
    Message,
    Task,
    ToolCall,
    VerifierSpec,
    Workspace,
    WorldSetup,
)
from data.runtime.answer_match import final_answer, match, normalize_answer
from data.runtime.world_runtime import conversation_attempt
from harnesses.tool_replay import attempt_text
from judges.score import Score


def answer_key(response: str) -> str:
    """What two replies must share to give the same answer: their normalised final answer."""
    return normalize_answer(final_answer(response))


def distinct_attempts(
    attempts: list[Attempt],
    keep: Callable[[Attempt], bool],
    limit: int,
    same_as: Callable[[str], str] = answer_key,
) -> list[Attempt]:
    """Up to `limit` attempts that `keep` accepts, one per distinct non-empty answer (as
    `same_as` keys a response), in attempt order (an answer given several times is shown to a
    judge once)."""
    chosen: dict[str, Attempt] = {}
    for attempt in sorted(attempts, key=lambda a: a.index):
        answer = same_as(attempt.response)
        if answer and answer not in chosen and keep(attempt):
            chosen[answer] = attempt
    return list(chosen.values())[:limit]


def score(spec: AnswerSpec, completion: str, gold: str, question: str = "") -> Score:
    """1.0 if the completion's answer matches the gold answer under `spec`, else 0.0; an
    answer padded with `question` (the task's, where known) scores 0.0."""
    reward, why, exact = match(completion, gold, spec.f1_threshold, spec.context, question)
    return Score(reward, why, exact=exact)


# --- for trainers ------------------------------------------------------------------------

Completion = str | list[dict[str, Any]]


def completion_text(completion: Completion) -> str:
    """The text of a trainer's completion: the string itself (standard format), or the last
    assistant message's content (conversational format)."""
    if isinstance(completion, str):
        return completion
    replies = [
        m.get("content") or "" for m in completion if m.get("role", "assistant") == "assistant"
    ]
    return str(replies[-1]) if replies else ""


@functools.lru_cache(maxsize=4096)
def spec_of(text: str) -> VerifierSpec:
    """A verifier spec from its JSON column, parsed once: a GRPO batch repeats each task's spec
    for every completion of its group, and a trainer sees the same tasks epoch after epoch."""
    return VERIFIER_SPEC.validate_json(text)


def columns_of(
    verifier: list[str | dict[str, Any]], solution: list[str] | None, answer: list[str] | None
) -> tuple[list[VerifierSpec], list[str]]:
    """The verifier specs and gold answers of a trainer's batch (`solution`, else `answer`)."""
    golds = solution if solution is not None else answer
    if golds is None:
        raise ValueError("a reward function needs a `solution` or `answer` column")
    specs = [
        spec_of(v) if isinstance(v, str) else VERIFIER_SPEC.validate_python(v) for v in verifier
    ]
    if len(specs) != len(golds):
        raise ValueError(f"{len(specs)} verifier specs for {len(golds)} gold answers")
    return specs, golds


def replay_attempt(completion: Completion) -> str:
    """A tool-replay attempt's JSON text: a multi-turn episode's tool calls and final answer,
    else the reply itself (the tool-replay harness's attempt JSON, as a single-turn trainer's
    completion holds it)."""
    if isinstance(completion, list):
        calls, answer = conversation_attempt(completion)
        if calls:
            made = [ToolCall(name=name, arguments=arguments) for name, arguments in calls]
            return attempt_text(made, answer)
    return completion_text(completion)


def question_of(prompt: Any) -> str:
    """What a trainer's prompt asks: the text itself, or its last user message's content."""
    if isinstance(prompt, str):
        return prompt
    asked = [m.get("content") or "" for m in prompt or [] if m.get("role") == "user"]
    return str(asked[-1]) if asked else ""


def trainer_task(
    prompt: Any,
    gold: str,
    spec: VerifierSpec,
    kind: str = "doc_qa",
    workspace: str | dict[str, Any] | None = None,
    world: str | dict[str, Any] | None = None,
) -> Task:
    """A stand-in task for grading a trainer's completion: its prompt, gold answer, verifier
    and (code tasks) workspace or (tool-use tasks) world, as the taskset's columns hold them."""
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    messages = [Message(role=m["role"], content=m["content"] or "") for m in prompt]
    lineage = Lineage(generator="trainer", generator_version="", prompt_hash="", model="", seed="")
    if isinstance(workspace, str):
        workspace = json.loads(workspace)
    if isinstance(world, str):
        world = json.loads(world)
    return Task(
        task_id="",
        kind=kind,
        prompt=messages,
        answer=gold,
        verifier=spec,
        evidence=[],
        source=[],
        lineage=lineage,
        workspace=Workspace.model_validate(workspace) if workspace else None,
        world=WorldSetup.model_validate(world) if world else None,
    )
