"""The single-turn harness: the solver sees exactly the task's prompt, with no tools, and its
one reply is the attempt.

It runs under the name of the environment it stands for: `closed_book` (a document question
alone), `open_book` (the passages are in the prompt), `code_single_turn` (the prompt shows the
files; the reply holds the edits), and trace tasks' `closed_book` (the conversation is in the
prompt). A harness knows how a solver attempts a task; it never scores (the judges do).
"""

from __future__ import annotations

from dataclasses import dataclass

from data.lake import Task
from data.llm import LLMClient, Reply

CLOSED_BOOK = "closed_book"
OPEN_BOOK = "open_book"


@dataclass(frozen=True)
class SingleTurn:
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
