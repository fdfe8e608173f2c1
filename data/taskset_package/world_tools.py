"""The tool server of a taskfoundry package's world tasks: the task's world tools, each call run
on the rollout's own world (a fresh in-memory DuckDB from the task's spec and initial state).

verifiers launches it once per rollout (`python -m <package>.world_tools`); for a task without a
world it offers no tools. It imports only the verifiers library and the package's own modules.
"""

from __future__ import annotations

from typing import Any, cast

import verifiers.v1 as vf
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, Tool

from .world_runtime import World, WorldSpec


class WorldToolset(vf.Toolset[vf.ToolsetConfig]):
    """The world's tools, advertised by their own names with their JSON-schema parameters."""

    TOOL_PREFIX = None  # the model calls the world's tools by the names the gold calls use

    def __init__(self, config: vf.ToolsetConfig) -> None:
        super().__init__(config)
        self.world: World | None = None

    async def setup_task(self, task: Any) -> None:
        """Open the rollout's world at the task's initial state."""
        world = getattr(task, "world", None)
        if world:
            self.world = World(WorldSpec.model_validate_json(world["spec"]), world["initial"])

    def register(self, mcp: MCPServer) -> None:
        # the catalog is the world's, known only once the task is: serve it directly
        server = cast(Any, mcp)
        server.list_tools = self.list_tools
        server.call_tool = self.call_tool

    async def list_tools(self) -> list[Tool]:
        """The world's tools (none without a world)."""
        if self.world is None:
            return []
        return [
            Tool(name=tool.name, description=tool.description, input_schema=tool.parameters)
            for tool in self.world.spec.tools
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult:
        """Run the call on the rollout's world; its result (or error) is the message the model
        reads, as taskfoundry's own harness gives it."""
        if self.world is None:
            raise ValueError(f"unknown tool {name!r}: this task has no world")
        result = self.world.call(name, arguments)
        return CallToolResult(
            content=[TextContent(type="text", text=result.message())], is_error=not result.ok
        )


if __name__ == "__main__":
    WorldToolset.run()
