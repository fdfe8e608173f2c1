"""What ingest writes to the lake: documents and their chunks, repositories and commits,
worlds, production traces and the intents found in them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from data.lake.records.base import Record
from data.lake.records.values import ToolCall, ToolSpec


class Source(Record):
    """One ingested file, accepted or not (`status` says which, `reason` why not)."""

    source_id: str
    path: str  # where the operator's machine read it from
    kind: Literal["doc"] = "doc"
    format: str
    sha256: str
    n_chars: int
    title: str
    text: str
    ingested_at: datetime
    notes: str = ""  # what its converter left out, e.g. "pages without a text layer: 3-4"
    name: str = ""  # how exports name it: relative to its ingest root (`data.public_names`)


class ChangedFile(BaseModel):
    """One file a commit changed; line counts are None for a binary file."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    path: str
    additions: int | None
    deletions: int | None
    is_test: bool


CommitKind = Literal["source_and_tests", "source_only", "tests_only", "other"]


class Repo(Record):
    """One ingested repository: where it came from and the local mirror its history is read
    from (under FOUNDRY_HOME/repos)."""

    repo_id: str
    origin: str
    mirror: str
    language: str
    head: str
    n_commits: int
    n_test_files: int
    ingested_at: datetime


class Commit(Record):
    """One commit of an ingested repository and its change against its first parent."""

    repo_id: str
    sha: str
    parent: str  # "" for a root commit
    author: str
    authored_at: str  # ISO 8601, as git records it
    message: str
    files: list[ChangedFile]
    kind: CommitKind
    diff: str
    diff_truncated: bool


class CommitReplay(Record):
    """What replaying a commit in the sandbox showed: the tests that fail at its start (the
    parent with the commit's tests) and pass at the commit (F2P), those that pass at both (P2P),
    and the reference patch, which passed all of them when applied to the start."""

    repo_id: str
    sha: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    reference_patch: str
    test_patch: str
    tests_before: int
    tests_after: int


class WorldSource(Record):
    """One simulated tool world: written by hand (a spec file), or built from production
    traces' tool calls, with the replay-based fidelity score it got against them."""

    world_id: str  # name@version#hash
    name: str
    origin: str  # "file:<path>", or "traces:<observation key>"
    spec: str  # the WorldSpec as JSON
    written_by: Literal["hand", "model", "draft"]
    fidelity: float | None  # traces only: how closely replayed calls match the recorded ones
    fidelity_report: str  # JSON: calls compared and the mismatches
    ingested_at: datetime


class Chunk(Record):
    chunk_id: str
    source_id: str
    index: int
    text: str
    char_start: int
    char_end: int
    embedding: list[float]
    location: str = ""  # its section in the source: "page 3", "sheet Q1, rows 2-21", ...


class TraceMessage(BaseModel):
    """One message of a traced conversation, in the OpenAI chat shape."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str = ""  # a tool message: the call it answers


class Trace(Record):
    """One production exchange, scrubbed: the conversation up to the assistant's final answer.

    `request` is the last user message (what was asked), `answer` the final assistant text.
    Everything here went through `data.scrub` first; `scrubbed` counts what was replaced, by
    kind. `trace_id` hashes the scrubbed conversation, so the same exchange ingested twice (or
    from two formats) is stored once.
    """

    trace_id: str
    origin: str  # "file:line", "file#span", "file#rollout"
    format: Literal["proxy", "openai", "otel"]
    model: str
    messages: list[TraceMessage]
    tools: list[ToolSpec]
    request: str
    answer: str
    scrubbed: dict[str, int]
    embedding: list[float]  # of `request`
    ingested_at: datetime
    occurred_at: datetime | None = None  # when the exchange happened, where its format says

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [call for m in self.messages for call in m.tool_calls]


class Intent(Record):
    """One cluster of similar user requests in one clustering of the traces, with its label."""

    clustering_id: str  # hashes the trace ids clustered
    cluster: int
    label: str
    named_by: str  # "model", or "keywords: <why the model's name was not used>"
    size: int
    share: float
    trace_ids: list[str]
    examples: list[str]
