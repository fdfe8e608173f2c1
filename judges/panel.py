"""Asking the judge panel one structured question: every judge votes, errors included."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from data.llm import LLMClient, LLMError

V = TypeVar("V", bound=BaseModel)


@dataclass(frozen=True)
class JudgeVote:
    judge: str
    decision: str  # "pass", "fail" or "error"
    reason: str


def escape(text: str) -> str:
    """Neutralise tag-like text so content cannot close or open a delimited block."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def panel_votes(
    llm: LLMClient,
    messages: list[dict[str, str]],
    schema: type[V],
    passed: Callable[[V], bool],
    reason: Callable[[V], str],
    max_tokens: int = 120,
) -> list[JudgeVote]:
    """Each judge's vote on `messages`: its reply parsed into `schema` (repaired once), then
    `passed` decides pass or fail; a judge without a usable reply votes "error"."""

    async def vote(role: str) -> JudgeVote:
        try:
            verdict = await llm.structured(role, messages, schema, max_tokens=max_tokens, repairs=1)
        except LLMError as error:
            return JudgeVote(role, "error", str(error)[:200])
        return JudgeVote(role, "pass" if passed(verdict) else "fail", reason(verdict))

    return list(await asyncio.gather(*(vote(role) for role in llm.judge_roles)))
