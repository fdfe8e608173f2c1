"""The document-search harness: the solver finds the fact with tools over the corpus, then answers.

Tools over the ingested chunks: `search(query)` (BM25 via `bm25s`, the best few passages with
their ids and a snippet) and `read(chunk_id)` (a whole passage). Each turn the solver replies with
one JSON action, `{"tool": "search" | "read" | "answer", "argument": ...}`; the tool's result
comes back as the next user message, and an unusable reply is told so and costs its turn. An
attempt that has not answered after `max_turns` turns has answered nothing (reward 0). Every turn
is a model call under the attempt's rollout id, so the recording proxy holds the whole
trajectory (messages, actions, results, final answer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import bm25s
from pydantic import BaseModel, ConfigDict, Field

from data.llm import LLMClient, Reply, settle
from data.prompts import load_prompt
from data.records import Task
from harnesses.episode import Episode

NAME = "doc_search"
SYSTEM = load_prompt(__file__, "doc_search_system")
RESULTS = 3
SNIPPET_CHARS = 240


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: Literal["search", "read", "answer"]
    argument: str = Field(max_length=400)


class CorpusIndex:
    """BM25 over the corpus chunks, plus lookup by id."""

    def __init__(self, chunks: list[tuple[str, str]]) -> None:
        if not chunks:
            raise ValueError("the corpus has no chunks to search")
        self.ids = [chunk_id for chunk_id, _ in chunks]
        self.texts = dict(chunks)
        self.retriever = bm25s.BM25()
        tokens = bm25s.tokenize([text for _, text in chunks], stopwords="en", show_progress=False)
        self.searchable = bool(tokens.vocab)  # a corpus of stopwords alone has nothing to index
        if self.searchable:
            self.retriever.index(tokens, show_progress=False)

    def search(self, query: str, k: int = RESULTS) -> list[tuple[str, str]]:
        """(chunk id, snippet) of the best matches, best first; [] when nothing matches."""
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab or not self.searchable:
            return []
        found, scores = self.retriever.retrieve(
            tokens, k=min(k, len(self.ids)), show_progress=False
        )
        return [
            (self.ids[i], " ".join(self.texts[self.ids[i]].split())[:SNIPPET_CHARS])
            for i, score in zip(found[0], scores[0], strict=True)
            if score > 0
        ]

    def read(self, chunk_id: str) -> str | None:
        """A passage by id ("c1" or "[c1]", as the results show it)."""
        return self.texts.get(chunk_id.strip().strip("[]").strip())


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
            hits = self.index.search(action.argument)
            if not hits:
                return f"No passage matches {action.argument!r}. Try other keywords."
            return "Results:\n" + "\n".join(f"[{cid}] {snippet}" for cid, snippet in hits)
        text = self.index.read(action.argument)
        if text is None:
            return f"There is no passage {action.argument!r}. Use an id from the results."
        return f"Passage {action.argument.strip()}:\n{text}"


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
