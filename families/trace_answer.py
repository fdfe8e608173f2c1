"""Trace answer and near miss: reply to a production request (the conversation is in the
prompt) as well as its good reply did, or better than a failed one. Environment: `closed_book`,
one reply with the conversation in the prompt. See `families.traces`."""

from __future__ import annotations

from data.config import FoundryConfig
from data.lake import Task
from data.llm import Endpoint
from families.base import Services
from families.traces import TraceFamily
from harnesses.base import Harness
from harnesses.single_turn import CLOSED_BOOK, SingleTurn
from judges import hacks


class TraceAnswer(TraceFamily):
    kinds = ("trace_answer", "near_miss")
    audit = hacks.REPLIES

    def environment(self, task: Task, config: FoundryConfig, solver: Endpoint) -> str:
        return CLOSED_BOOK

    def harness(self, name: str, services: Services) -> Harness:
        return SingleTurn(name)


FAMILY = TraceAnswer()
