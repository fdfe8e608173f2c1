"""The task kinds (a module of its own, so the configuration can name them cheaply)."""

from typing import Literal

TaskKind = Literal[
    "doc_qa",
    "commit_replay",
    "function_rebuild",
    "commit_sequence",
    "trace_answer",
    "near_miss",
    "tool_replay",
    "world_tool_use",
]
CODE_KINDS: tuple[str, ...] = ("commit_replay", "function_rebuild", "commit_sequence")
TRACE_KINDS: tuple[str, ...] = ("trace_answer", "near_miss", "tool_replay")
