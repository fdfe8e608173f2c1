"""Value objects nested inside records: evidence, tool calls, workspaces, tool
environments, worlds, lineage and usage."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from data.lake.records.base import Direction, Remedy


class Evidence(BaseModel):
    """A quote from a chunk that supports the gold answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    chunk_id: str
    quote: str


class SourceRef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    source_id: str
    path: str
    chunk_id: str
    location: str = ""  # where in the source the chunk is: "page 3", "slide 2", "cell 4", ...


class ToolCall(BaseModel):
    """One tool call an assistant made (or is expected to make): the tool and its arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str = ""  # pairs the call with its result message


class Checkpoint(BaseModel):
    """One step of a commit sequence: its tests' patch, applied after the attempt's step, and
    the tests that must then pass."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    test_patch: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]


class Workspace(BaseModel):
    """The repository state a code task starts from, enough to rebuild it without taskfoundry:
    check out `base` from `origin`, apply `start_patch` (what the solver sees), then
    `test_patch` (tests the solver does not see) before the verifier's tests run."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    repo_id: str
    origin: str
    base: str  # the commit the start is built on
    start_patch: str = ""  # e.g. a function body removed (function rebuild)
    test_patch: str = ""  # hidden tests, applied after the solver's patch (commit replay)
    files: list[str] = Field(default_factory=list)  # the files the prompt shows


class ToolSpec(BaseModel):
    """A tool the traced assistant was offered: name, description, JSON-schema parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class RecordedCall(BaseModel):
    """A tool call observed in production and the result it got, for replay."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    call: ToolCall
    result: str
    # what a replayed call must repeat to get `result`: the key arguments (ids, numbers, enums)
    key_arguments: dict[str, Any] = Field(default_factory=dict)


class ToolEnvironment(BaseModel):
    """What a tool-replay task's solver can call: the tools offered in production and the
    results recorded there (a call the trace did not make has no result to replay)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tools: list[ToolSpec]
    recorded: list[RecordedCall]


class WorldSetup(BaseModel):
    """What a tool-use task's solver acts on, enough to rebuild it without the lake: the world
    spec, the state it starts from, and the turn limit. The spec is kept as its JSON text
    (`harnesses.world.WorldSpec`), because its tables' column order matters to its SQL and
    nested record fields are stored with sorted keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    world_id: str  # name@version#hash of the spec
    spec: str
    initial: dict[str, list[dict[str, Any]]]
    max_turns: int

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The world's tools in the OpenAI tools format."""
        return [
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": tool.get("description", ""),
                    "parameters": tool.get("parameters", {"type": "object"}),
                },
            }
            for tool in json.loads(self.spec).get("tools", [])
        ]


class RepairStep(BaseModel):
    """How the repair loop made a variant: from which task, in which direction, and the ladder
    levels walked since the task it started from."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    parent: str  # the task this variant was made from
    root: str  # the task the loop started from (not itself a variant)
    step: int  # 1 for a variant of the root
    path: list[str]  # the levels walked, the root's first, this variant's last
    direction: Direction


class Remedied(BaseModel):
    """A task whose verifier review tightened after a reward hack: the remedy and its parent."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    remedy: Remedy
    parent: str


class ReviewRef(BaseModel):
    """A person's review decision a task came from (`foundry curate`): the reviewer's edit of
    `task_id` (this task replaces it), or a task made to replace `task_id`, which the reviewer
    rejected for `reason`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    action: Literal["edited", "rejected"]
    task_id: str  # the task reviewed
    decision_id: str  # the decision (`decisions` table)
    reviewer: str
    reason: str = ""  # a rejection's reason (`data.lake.curation.REJECTION_REASONS`)
    note: str = ""  # the reviewer's own words


class TargetRef(BaseModel):
    """The failure a task was made to target (`foundry loop`): a policy's failed attempt at a
    train-split task, in one round of the loop."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    round: int  # the loop round whose policy failed
    policy: str  # that policy's label (`data.llm.served_policy`)
    task_id: str  # the task it failed
    attempt_id: str  # its first failed attempt
    failure: str  # the failure's kind (`flows.steering.failure_kind`)
    reason: str  # the verifier's words on that attempt
    rubric: list[str] = Field(default_factory=list)  # the task's rubric: what a right answer meets


class Lineage(BaseModel):
    """Where a task came from: enough to regenerate it. `knobs` hold the generator's settings
    (its difficulty level among them); a variant names the repair step that made it, a
    remedied task the remedy (it keeps its parent's repair step), a task the loop made from a
    policy's failure that failure (`target`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    generator: str
    generator_version: str
    prompt_hash: str
    model: str
    seed: str
    knobs: dict[str, int | str] = Field(default_factory=dict)
    repair: RepairStep | None = None
    remedied: Remedied | None = None
    target: TargetRef | None = None
    review: ReviewRef | None = None


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    prompt_tokens: int = 0
    completion_tokens: int = 0
