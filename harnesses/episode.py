"""One multi-turn solver attempt: each turn a JSON action, the running usage, the final reply.

Shared by the tool-using harnesses (doc search, tool replay): every turn is a model call under
the attempt's rollout id with its own seed, so the recording proxy holds the whole trajectory
and a re-run replays it from the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from data.lake import Usage
from data.llm import LLMClient, Reply

TURN_SEED_STRIDE = 1_000_003  # keeps every (attempt, turn) seed distinct
A = TypeVar("A", bound=BaseModel)


@dataclass
class Episode:
    llm: LLMClient
    messages: list[dict[str, str]]
    rollout: str
    temperature: float
    max_tokens: int
    seed: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = True
    turns: int = 0

    async def act(self, schema: type[A], example: str) -> A | None:
        """The solver's next action, parsed into `schema`; an unusable reply is told so (with
        `example`, the shape it should have) and gives None: it costs its turn."""
        reply = await self.llm.structured_chat(
            "solver",
            self.messages,
            schema,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=self.seed + self.turns * TURN_SEED_STRIDE,
            rollout_id=self.rollout,
        )
        self.turns += 1
        self.prompt_tokens += reply.usage.prompt_tokens
        self.completion_tokens += reply.usage.completion_tokens
        self.cached = self.cached and reply.cached
        self.messages.append({"role": "assistant", "content": reply.text})
        try:
            return schema.model_validate_json(reply.text)
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"]
            self.tell(
                f"That is not a valid action ({problem}). Reply with one JSON object: {example}."
            )
            return None

    def tell(self, text: str) -> None:
        """What the environment answers, as the next user message."""
        self.messages.append({"role": "user", "content": text})

    def reply(self, text: str) -> Reply:
        """The attempt's result, with the usage of every turn."""
        usage = Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens)
        return Reply(text, usage, self.cached, rollout_id=self.rollout)
