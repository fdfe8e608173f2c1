"""Tool replay: a production request answered with tools; the solver calls the recorded tools,
whose recorded results come back (`tool_replay`), and must make the calls that mattered. See
`families.traces`."""

from __future__ import annotations

from data.config import FoundryConfig
from data.lake import Task
from data.llm import Endpoint
from families.base import Services
from families.traces import TraceFamily
from harnesses.base import Harness
from harnesses.tool_replay import NAME, ToolReplay
from judges import hacks


class ToolReplayFamily(TraceFamily):
    kinds = ("tool_replay",)
    audit = hacks.CALLS

    def environment(self, task: Task, config: FoundryConfig, solver: Endpoint) -> str:
        return NAME

    def harness(self, name: str, services: Services) -> Harness:
        return ToolReplay()


FAMILY = ToolReplayFamily()
