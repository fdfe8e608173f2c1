"""What every harness offers calibration: a name and a way to attempt a task."""

from __future__ import annotations

from typing import Protocol

from data.llm import LLMClient
from data.llm_replies import Reply
from data.records import Task


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
