"""Simulated tool worlds for taskfoundry's tasks: the standalone world runtime
(`data.runtime.world_runtime`: specs, running worlds, tool calls) and the world a stored task
acts on."""

from __future__ import annotations

import functools

from data.lake import Task
from data.runtime.world_runtime import (
    CALL_TIMEOUT_S,
    IDENTIFIER,
    MEMORY_LIMIT,
    TOOL_NAME,
    Check,
    ColumnType,
    Snapshot,
    TableSpec,
    ToolDef,
    ToolResult,
    World,
    WorldSpec,
    column_values,
    load_world_spec,
)

__all__ = [
    "CALL_TIMEOUT_S",
    "IDENTIFIER",
    "MEMORY_LIMIT",
    "TOOL_NAME",
    "Check",
    "ColumnType",
    "Snapshot",
    "TableSpec",
    "ToolDef",
    "ToolResult",
    "World",
    "WorldSpec",
    "column_values",
    "load_world_spec",
    "world_spec",
]


@functools.lru_cache(maxsize=256)
def _spec(text: str) -> WorldSpec:
    return WorldSpec.model_validate_json(text)


def world_spec(task: Task) -> WorldSpec:
    """The world a tool-use task acts on (parsed once per distinct spec)."""
    if task.world is None:
        raise ValueError(f"task {task.task_id} has no world")
    return _spec(task.world.spec)
