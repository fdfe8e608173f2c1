"""The closed-book harness: the solver sees exactly the task's prompt, with no tools.

A harness knows how a solver attempts a task; it never scores (the judges do) and the task
never knows which harness attempts it.
"""

from __future__ import annotations

from dataclasses import dataclass

from data.llm import LLMClient, Reply
from data.records import Task

NAME = "closed_book"


@dataclass(frozen=True)
class ClosedBook:
    name: str = NAME

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
        """One independent solver attempt at `task` per rollout id (seeded, so a re-run replays
        from the cache)."""
        messages = [m.model_dump() for m in task.prompt]
        return await llm.sample(
            "solver",
            messages,
            len(rollout_ids),
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            rollout_ids=rollout_ids,
        )
