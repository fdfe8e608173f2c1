"""What every harness offers calibration: a name and a way to attempt a task."""

from __future__ import annotations

from typing import Protocol

from data.lake import Task
from data.llm import LLMClient, Reply


class Harness(Protocol):
    name: str

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
        """One attempt per rollout id; a reply's text is the attempt's final answer."""
        ...
