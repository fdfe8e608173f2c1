"""The document-search harness: the solver finds the fact with tools over the corpus, then answers.

Tools over the ingested chunks (`data.runtime.corpus_index`): `search(query)` (BM25, the best few
passages with their ids and a snippet) and `read(chunk_id)` (a whole passage). Each turn the
solver replies with one JSON action, `{"tool": "search" | "read" | "answer", "argument": ...}`;
the tool's result comes back as the next user message, and an unusable reply is told so and
costs its turn. An attempt that has not answered after `max_turns` turns has answered nothing
(reward 0). Every turn is a model call under the attempt's rollout id, so the recording proxy
holds the whole trajectory (messages, actions, results, final answer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from data.lake import Task
from data.llm import LLMClient, Reply, settle
from data.prompts import load_prompt
from data.runtime.corpus_index import HARNESS, CorpusIndex
from harnesses.episode import Episode

NAME = HARNESS
SYSTEM = load_prompt(__file__, "doc_search_system")


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: Literal["search", "read", "answer"]
    argument: str = Field(max_length=400)


@dataclass(frozen=True)
class DocSearch:
    index: CorpusIndex
    max_turns: int = 4
    turn_max_tokens: int = 128
    name: str = field(default=NAME)

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
        """One tool-using episode per rollout id; each reply's text is the final answer."""
        return await settle(
            [
                self._episode(task, llm, rollout, temperature, max(max_tokens, 48), seed + i)
                for i, rollout in enumerate(rollout_ids)
            ]
        )

    async def _episode(
        self,
        task: Task,
        llm: LLMClient,
        rollout: str,
        temperature: float,
        max_tokens: int,
        seed: int,
    ) -> Reply:
        episode = Episode(
            llm, _opening(task), rollout, temperature, max(max_tokens, self.turn_max_tokens), seed
        )
        for _ in range(self.max_turns):
            action = await episode.act(Action, '{"tool": ..., "argument": ...}')
            if action is None:
                continue
            if action.tool == "answer":
                return episode.reply(action.argument)
            episode.tell(self._run(action))
        return episode.reply("")

    def _run(self, action: Action) -> str:
        if action.tool == "search":
            return self.index.search_result(action.argument)
        return self.index.read_result(action.argument)


def _opening(task: Task) -> list[dict[str, str]]:
    """The harness's instructions merged into the task's system message, then the task."""
    messages = [m.model_dump() for m in task.prompt]
    if messages and messages[0]["role"] == "system":
        first = messages.pop(0)["content"]
        return [
            {"role": "system", "content": f"{SYSTEM.template.strip()}\n\n{first}"},
            *messages,
        ]
    return [{"role": "system", "content": SYSTEM.template.strip()}, *messages]
