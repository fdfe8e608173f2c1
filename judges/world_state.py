"""The verifier of a planted tool-use task: a predicate over the world's final state.

An attempt's calls are replayed on the task's world from its initial state
(`harnesses.world_replay`); it passes when that leaves the gold final state and, where the task
asks for a fact, its final answer matches the gold answer (`harnesses.world_check.passes`, the
predicate the task's self-check tested before it was offered).

Failed calls change nothing, so guessing is free unless it is refused: an attempt with more than
`2 * gold + EXTRA_CALLS` calls, a wildcard argument, or an argument swept through more values
than the gold calls give it scores 0 before it is replayed (`data.runtime.call_checks`). The
grading is `data.runtime.world_grading.grade_calls`, which the verifiers package runs too. A call of
a tool the task's world does not have runs nothing (the world answers "unknown tool" and leaves
the state as it was, as the harness does), so it can neither help nor, by itself, hurt: a
solver that names a tool wrongly and then makes the right calls still passes.
"""

from __future__ import annotations

import json
from typing import Any

from data.lake import Task
from data.runtime.errors import NoVerdict
from data.runtime.world_grading import grade_calls
from data.runtime.world_runtime import conversation_attempt
from harnesses.world import world_spec
from harnesses.world_check import self_check
from harnesses.world_replay import Call, as_calls, gold_calls, replay
from judges.score import Score
from judges.tool_calls import parse_calls


def attempt_of(completion: str | list[dict[str, Any]]) -> tuple[list[Call], str] | None:
    """The calls an attempt made and its final answer: from the harness's attempt JSON
    (`{"calls": [{"name", "arguments"}], "answer"}`), or from a trainer's conversational
    completion (its assistant messages' tool calls, the last message's text the answer). None
    when it is neither."""
    if isinstance(completion, str):
        calls = parse_calls(completion)
        if calls is None:
            return None
        answer = str(json.loads(completion).get("answer") or "")
        return as_calls(calls), answer
    return conversation_attempt(completion)


def grade(task: Task, completion: str | list[dict[str, Any]]) -> Score:
    """Replay the attempt's calls on the task's world from its initial state; 1.0 when that
    leaves the gold final state (and the answer matches, where the task asks a question).
    Raises `NoVerdict` where there is no world to replay on, or it fails (`grade_calls`)."""
    attempt = attempt_of(completion)
    if attempt is None:
        return Score(0.0, "not a tool-use attempt")
    verifier = task.verifier
    if task.world is None:
        raise NoVerdict("no_world", "the task has no world to replay on")
    calls, answer = attempt
    reward, why = grade_calls(
        world_spec(task),
        task.world.initial,
        calls,
        answer,
        gold_calls(task),
        verifier.final_state,
        task.answer,
    )
    return Score(reward, why, exact=reward == 1.0)


def task_self_check(task: Task) -> str | None:
    """`self_check` on a stored task, plus: its recorded final state is the gold calls'."""
    verifier = task.verifier
    if task.world is None:
        return "no_world"
    spec, initial, calls = world_spec(task), task.world.initial, gold_calls(task)
    failure = self_check(spec, initial, calls, task.answer)
    if failure is not None:
        return failure
    if replay(spec, initial, calls).final != verifier.final_state:
        return "recorded_final_state_is_not_the_gold_calls_state"
    return None
