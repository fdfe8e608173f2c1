"""The task kinds that layers below `families` name (a module of its own, cheap to import).

A task's kind is any string a registered family makes (`families.kinds()`). The shipped families
make `doc_qa`, `commit_replay`, `function_rebuild`, `commit_sequence`, `trace_answer`,
`near_miss`, `tool_replay` and `world_tool_use`; the export and the trace stages name the kinds
made from a production trace, whose rows carry that trace.
"""

TRACE_KINDS: tuple[str, ...] = ("trace_answer", "near_miss", "tool_replay")
