"""The trainer's reward functions (TRL `GRPOTrainer` signature), from the verifier registry:
`verifier_reward` for the types scored with no model and no sandbox, `judge_reward` for the
types a judge decides. Both read the taskset's own columns; a row another function scores gets
None, which TRL leaves to the others, and so does a completion the grader could not judge (no
verdict: a world that failed, a judge that was down), never a 0."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from data.llm import Endpoint, LLMClient, LLMError, ResponseCache
from data.runtime.errors import NoVerdict
from judges.rewards import Completion, columns_of, completion_text, trainer_task
from judges.verifier_types import grade, verifier_type
from judges.verifier_types.base import Reward, RewardRow


def verifier_reward(
    prompts: list[Any],
    completions: list[Completion],
    verifier: list[str | dict[str, Any]],
    solution: list[str] | None = None,
    answer: list[str] | None = None,
    **columns: Any,
) -> list[float | None]:
    """A TRL reward function (`reward_funcs=[verifier_reward]`) for the verifier types with a
    model-free reward (`VerifierType.reward`: today `exact_or_f1`, normalised exact match else
    token F1; `tool_calls`, the share of expected calls made in order; `world_state`, the
    completion's tool calls replayed on the row's `world` leave the gold state, the completion
    being the harness's attempt JSON or a conversation with tool calls). The gold answer is the
    `solution` column (trainer projections) or `answer` (the canonical taskset); the spec is the
    `verifier` column, as JSON or as a dict."""
    specs, golds = columns_of(verifier, solution, answer)
    per_row = {k: v for k, v in columns.items() if isinstance(v, list) and len(v) == len(specs)}
    rewards: list[float | None] = []
    for i, (prompt, completion, spec, gold) in enumerate(
        zip(prompts, completions, specs, golds, strict=True)
    ):
        reward = verifier_type(spec).reward
        row = RewardRow(prompt, completion, spec, gold, {k: v[i] for k, v in per_row.items()})
        rewards.append(judged(reward, row) if reward else None)
    return rewards


def judged(reward: Reward, row: RewardRow) -> float | None:
    """`reward` of `row`, None where the grader could not judge it (`NoVerdict`)."""
    try:
        return reward(row)
    except NoVerdict:
        return None


def judge_reward(
    endpoints: dict[str, Endpoint], cache: ResponseCache | None = None
) -> Callable[..., list[float | None]]:
    """A TRL reward function for the verifier types a judge decides (`judged`: today
    `llm_equivalence` and `rubric`): each completion is graded as calibration grades it, by the
    judge panel at `endpoints` (as `data.llm.endpoints` resolves them). Other types, and completions
    the panel leaves undecided or cannot be asked about (no verdict), get None. It reads the
    same columns as `verifier_reward`."""

    def reward(
        prompts: list[Any],
        completions: list[Any],
        verifier: list[str | dict[str, Any]],
        solution: list[str] | None = None,
        answer: list[str] | None = None,
        **columns: Any,
    ) -> list[float | None]:
        specs, golds = columns_of(verifier, solution, answer)

        async def one(llm: LLMClient, prompt: Any, completion: Any, spec, gold) -> float | None:
            if not verifier_type(spec).judged:
                return None
            task = trainer_task(prompt, gold, spec)
            try:
                return (await grade(task, completion_text(completion), llm)).reward
            except LLMError:
                return None

        async def run() -> list[float | None]:
            llm = LLMClient(endpoints, cache, run_id="trainer")
            try:
                batch = zip(prompts, completions, specs, golds, strict=True)
                return list(await asyncio.gather(*(one(llm, *row) for row in batch)))
            finally:
                await llm.aclose()

        return asyncio.run(run())

    return reward
