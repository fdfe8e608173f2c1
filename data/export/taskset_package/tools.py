"""The tool server of a taskfoundry package: each task's own tools, per rollout, as taskfoundry's
calibration harness gave them, by the task's `toolset` (its environment's, from taskfoundry's
`data/export/environments.py`):

- `world`: the world's tools, each call run on the rollout's own world (a fresh in-memory
  DuckDB from the task's spec and initial state; `world_runtime`);
- `replay`: the tools production offered, each call answered with the result production
  recorded for it, or that there is none (`replay_runtime`);
- `search`: `search(query)` and `read(passage_id)` over the corpus shipped beside this module
  (`corpus_index`);
- `none`: no tools.

verifiers launches it once per rollout (`python -m <package>.tools`). It imports only the
verifiers library, pyarrow and the package's own modules.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, cast

import pyarrow.parquet as pq
import verifiers.v1 as vf
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, Tool

from .runtime.corpus_index import CORPUS_FILE, CorpusIndex
from .runtime.replay_runtime import NO_RESULT, replayed
from .runtime.world_runtime import World, WorldSpec

CORPUS = Path(__file__).resolve().parent / CORPUS_FILE
SEARCH_TOOLS = [
    Tool(
        name="search",
        description="Find the passages of the documents that best match a few keywords: their"
        " ids and the start of their text, best first.",
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "a few keywords"}},
            "required": ["query"],
        },
    ),
    Tool(
        name="read",
        description="Show a whole passage by its id, as the search results give it.",
        input_schema={
            "type": "object",
            "properties": {"passage_id": {"type": "string", "description": "e.g. c12"}},
            "required": ["passage_id"],
        },
    ),
]


class TaskTools(Protocol):
    def listed(self) -> list[Tool]:
        """The tools the task offers."""

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """A call's result as the model reads it, and whether the call failed."""


class WorldTools:
    """The world's tools on the rollout's world, opened at the task's initial state."""

    def __init__(self, world: dict[str, Any]) -> None:
        self.world = World(WorldSpec.model_validate_json(world["spec"]), world["initial"])

    def listed(self) -> list[Tool]:
        return [
            Tool(name=tool.name, description=tool.description, input_schema=tool.parameters)
            for tool in self.world.spec.tools
        ]

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        result = self.world.call(name, arguments)
        return result.message(), not result.ok


class ReplayTools:
    """The tools production offered; a call gets the result production recorded for the call
    it repeats (each recorded call replayed once before any is replayed again)."""

    def __init__(self, environment: dict[str, Any]) -> None:
        self.environment = environment
        self.used: set[int] = set()

    def listed(self) -> list[Tool]:
        return [
            Tool(
                name=tool["name"],
                description=tool.get("description", ""),
                input_schema={"type": "object", **(tool.get("parameters") or {})},
            )
            for tool in self.environment["tools"]
        ]

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        recorded = self.environment["recorded"]
        index = replayed(recorded, (name, arguments), self.used)
        return (NO_RESULT, True) if index is None else (str(recorded[index]["result"]), False)


class SearchTools:
    """BM25 search and read by passage id over the package's corpus."""

    def __init__(self, index: CorpusIndex) -> None:
        self.index = index

    def listed(self) -> list[Tool]:
        return SEARCH_TOOLS

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        argument = {"search": "query", "read": "passage_id"}.get(name)
        if argument is None:
            return f"unknown tool {name!r}: use search or read", True
        value = arguments.get(argument) if isinstance(arguments, dict) else None
        if not isinstance(value, str):
            return f"invalid arguments: {name} takes one string, {argument}", True
        if name == "search":
            return self.index.search_result(value), False
        return self.index.read_result(value), False


@functools.cache
def corpus_index() -> CorpusIndex:
    """The index of the corpus shipped beside this module, built once per server."""
    rows = pq.read_table(CORPUS, columns=["chunk_id", "text"]).to_pylist()
    return CorpusIndex([(row["chunk_id"], row["text"]) for row in rows])


# each toolset's tools for a task
TOOLSETS: dict[str, Callable[[Any], TaskTools | None]] = {
    "world": lambda task: WorldTools(task.world),
    "replay": lambda task: ReplayTools(task.environment),
    "search": lambda task: SearchTools(corpus_index()),
    "none": lambda task: None,
}


def task_tools(task: Any) -> TaskTools | None:
    """The tools of `task` (a TaskfoundryData), or None for a task without tools."""
    return TOOLSETS[task.toolset](task)


class TaskToolset(vf.Toolset[vf.ToolsetConfig]):
    """The task's tools, advertised by their own names with their JSON-schema parameters."""

    TOOL_PREFIX = None  # the model calls the tools by the names the gold calls use

    def __init__(self, config: vf.ToolsetConfig) -> None:
        super().__init__(config)
        self.tools: TaskTools | None = None

    async def setup_task(self, task: Any) -> None:
        """Open the rollout's tools: its world, its replay, or the corpus search."""
        self.tools = task_tools(task)

    def register(self, mcp: MCPServer) -> None:
        # the catalog is the task's, known only once the task is: serve it directly
        server = cast(Any, mcp)
        server.list_tools = self.list_tools
        server.call_tool = self.call_tool

    async def list_tools(self) -> list[Tool]:
        """The task's tools (none for a task without tools)."""
        return [] if self.tools is None else self.tools.listed()

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult:
        """Run the call; its result (or error) is the message the model reads, as taskfoundry's
        own harness gives it."""
        if self.tools is None:
            raise ValueError(f"unknown tool {name!r}: this task has no tools")
        text, failed = self.tools.call(name, arguments)
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=failed)


if __name__ == "__main__":
    TaskToolset.run()
