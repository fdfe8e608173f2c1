"""The typed record schema: every row that enters the lake or a taskset is one of these.

Records are frozen pydantic models. Nested fields (verifier spec, evidence, lineage, verdicts,
source references) are stored in parquet as JSON strings, except `prompt`, which stays a list of
`{role, content}` structs because that is the shape trainers read.
"""

from __future__ import annotations

import functools
import hashlib
import json
import types
import typing
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

SCHEMA_VERSION = "1"

Band = Literal["too_easy", "in_band", "too_hard"]
Pool = Literal["easy", "normal", "hard"]
# the difficulty pools (prime-rl's): each pool's inclusive ceiling on the mean reward, in order
POOL_CEILINGS: dict[Pool, float] = {"hard": 0.25, "normal": 0.75, "easy": 1.0}
ItemStatus = Literal["done", "rejected", "failed"]
Direction = Literal["harder", "easier"]  # where the repair loop moves an out-of-band task
# what reviewing a task did to its verifier (see `Review`): none_held, a remedy was tried and
# none held; no_remedy, its family has none to try (code and tool-use tasks)
Remedy = Literal[
    "none_needed",
    "exact_match_only",
    "equivalence_rubric",
    "rubric_items",
    "none_held",
    "no_remedy",
]


def content_id(*parts: Any, length: int = 16) -> str:
    """A stable content hash of `parts` (canonical JSON, sha256, hex prefix)."""
    canonical = json.dumps(
        parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_jsonable
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:length]


def seed_for(*parts: str) -> tuple[str, int]:
    """A seed string and the 32-bit integer derived from it (sha256, never `hash()`)."""
    text = "/".join(parts)
    return text, int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def utcnow() -> datetime:
    return datetime.now(UTC)


class Record(BaseModel):
    """Base of all lake records: frozen, no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_row(self) -> dict[str, Any]:
        """Flatten to a parquet row: nested models and containers become JSON strings."""
        row: dict[str, Any] = {}
        for name, storage in _storage(type(self)).items():
            value = getattr(self, name)
            if storage == "messages":
                row[name] = [m.model_dump() for m in value]
            elif storage == "json":
                row[name] = json.dumps(_dump(value), ensure_ascii=False, sort_keys=True)
            else:
                row[name] = value
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Record:
        """Inverse of `to_row`."""
        values = {}
        fields = cls.model_fields
        for name, storage in _storage(cls).items():
            value = row.get(name)
            if value is None and not fields[name].is_required():
                continue  # a column added after this row was written: take the default
            if isinstance(value, str) and storage == "json":
                value = json.loads(value)
            values[name] = value
        return cls.model_validate(values)

    @classmethod
    @functools.cache
    def arrow_schema(cls) -> pa.Schema:
        """The parquet schema of this record type."""
        return pa.schema(
            [
                pa.field(name, _arrow_type(info.annotation))
                for name, info in cls.model_fields.items()
            ]
        )


@functools.cache
def _storage(record: type[Record]) -> dict[str, Literal["messages", "json", "plain"]]:
    """How each field of `record` is stored in parquet: a list of message structs, a JSON
    string (nested models and containers) or the value itself."""
    storage: dict[str, Literal["messages", "json", "plain"]] = {}
    for name, info in record.model_fields.items():
        if _is_message_list(info.annotation):
            storage[name] = "messages"
        elif _is_nested(info.annotation):
            storage[name] = "json"
        else:
            storage[name] = "plain"
    return storage


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def _strip_optional(annotation: Any) -> Any:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _is_message_list(annotation: Any) -> bool:
    inner = _strip_optional(annotation)
    return typing.get_origin(inner) is list and typing.get_args(inner) == (Message,)


def _is_float_list(annotation: Any) -> bool:
    inner = _strip_optional(annotation)
    return typing.get_origin(inner) is list and typing.get_args(inner) == (float,)


def _is_nested(annotation: Any) -> bool:
    inner = _strip_optional(annotation)
    if _is_float_list(inner):
        return False
    if typing.get_origin(inner) in (list, dict, tuple):
        return True
    members = typing.get_args(inner) if isinstance(inner, types.UnionType) else (inner,)
    return all(isinstance(m, type) and issubclass(m, BaseModel) for m in members)


_SCALARS: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    datetime: pa.timestamp("us", tz="UTC"),
}


def _arrow_type(annotation: Any) -> pa.DataType:
    inner = _strip_optional(annotation)
    if inner in _SCALARS:
        return _SCALARS[inner]
    if typing.get_origin(inner) is Literal:
        return pa.string()
    if _is_float_list(inner):
        return pa.list_(pa.float32())
    if _is_message_list(inner):
        return pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    return pa.string()  # nested: stored as JSON


# --- value objects nested inside records -------------------------------------------------


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    role: Literal["system", "user", "assistant", "tool"]
    content: str


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


# Fields of other verifier types hold these when unset, in rows written before the union.
_UNSET: tuple[Any, ...] = ([], None, 0.6)


class _Spec(BaseModel):
    """Base of the verifier specs: frozen, no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _drop_unset(cls, data: Any) -> Any:
        # old rows carry every type's fields: drop other types' unset ones, refuse the rest
        if not isinstance(data, dict):
            return data
        return {k: v for k, v in data.items() if k in cls.model_fields or v not in _UNSET}


class AnswerSpec(_Spec):
    """An answer compared with the gold one: normalised exact match, or token F1 >=
    `f1_threshold`."""

    f1_threshold: float = 0.6
    # Fill-in-the-blank tasks: the text before and after the blank. An attempt that repeats
    # the whole sentence is cut down to what it put in the blank before it is compared.
    context: list[str] = Field(default_factory=list)
    # Checkable items a passing attempt must also meet (from failed attempts and mined reward
    # hacks). With a rubric, an llm_equivalence verifier accepts only an exact match without
    # asking the panel: a token-F1 match is no longer enough on its own.
    rubric: list[str] = Field(default_factory=list)
    # answers known to fail; an exported taskset package checks that it rejects them
    negatives: list[str] = Field(default_factory=list)


class ExactOrF1Spec(AnswerSpec):
    """The answer match alone."""

    type: Literal["exact_or_f1"] = "exact_or_f1"


class LLMEquivalenceSpec(AnswerSpec):
    """The answer match, and when that fails, the judge panel decides whether the attempt
    means the gold answer."""

    type: Literal["llm_equivalence"] = "llm_equivalence"


class RubricSpec(_Spec):
    """The judge panel decides whether the attempt meets every rubric item (the gold answer is
    a reference, not the only right reply)."""

    type: Literal["rubric"] = "rubric"
    rubric: list[str] = Field(default_factory=list)
    # each item judged on its own (document reports: one item per checkable fact): the reward
    # is the share of items the panel's majority finds met, and only every item met is a pass
    by_item: bool = False
    # answers known to fail (e.g. the production answer a near-miss task was made from); the
    # verifier's self-check makes sure it rejects them
    negatives: list[str] = Field(default_factory=list)


class UnitTestsSpec(_Spec):
    """The attempt is a patch to the task's workspace; it passes when every fail-to-pass test
    passes and every pass-to-pass test still passes (test ids as pytest names them,
    `path::Class::test`)."""

    type: Literal["unit_tests"] = "unit_tests"
    fail_to_pass: list[str] = Field(default_factory=list)
    pass_to_pass: list[str] = Field(default_factory=list)
    # commit sequences: the attempt's steps are applied in order, each followed by its
    # checkpoint; the reward is the share of checkpoints passed (all of them: a pass)
    checkpoints: list[Checkpoint] = Field(default_factory=list)


class _CallsSpec(_Spec):
    """Base of the specs that check an attempt's tool calls."""

    # the calls a passing attempt makes, in order, with the arguments that must match
    # (tool_calls: free-text arguments are left out; world_state: the gold calls)
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolCallsSpec(_CallsSpec):
    """The attempt's tool calls must include `tool_calls` in order (names and key arguments)."""

    type: Literal["tool_calls"] = "tool_calls"


class WorldStateSpec(_CallsSpec):
    """The attempt's calls, replayed on the task's world, must leave exactly `final_state`
    (rows per table), the state the gold calls leave; where the task asks a question, its
    answer must also match the gold answer exactly."""

    type: Literal["world_state"] = "world_state"
    final_state: dict[str, list[dict[str, Any]]]


# How an attempt is scored against the gold answer: one spec per verifier type.
VerifierSpec = Annotated[
    ExactOrF1Spec
    | LLMEquivalenceSpec
    | RubricSpec
    | UnitTestsSpec
    | ToolCallsSpec
    | WorldStateSpec,
    Field(discriminator="type"),
]
# parses a spec (a dict, or JSON with `validate_json`) to its type's class
VERIFIER_SPEC: TypeAdapter[VerifierSpec] = TypeAdapter(VerifierSpec)


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


class TargetRef(BaseModel):
    """The failure a task was made to target (`foundry loop`): a policy's failed attempt at a
    train-split task, in one round of the loop."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    round: int  # the loop round whose policy failed
    policy: str  # that policy's label (`data.served_policy`)
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


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    prompt_tokens: int = 0
    completion_tokens: int = 0


# --- lake records -------------------------------------------------------------------------


class Source(Record):
    """One ingested file, accepted or not (`status` says which, `reason` why not)."""

    source_id: str
    path: str
    kind: Literal["doc"] = "doc"
    format: str
    sha256: str
    n_chars: int
    title: str
    text: str
    ingested_at: datetime
    notes: str = ""  # what its converter left out, e.g. "pages without a text layer: 3-4"


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


class Task(Record):
    """A candidate or accepted task; `task_id` hashes its canonical form (not its lineage).

    `kind` is one a registered family makes (`families`). Code tasks carry a `workspace`; their
    `answer` is the reference patch.
    """

    task_id: str
    kind: str
    prompt: list[Message]
    answer: str
    verifier: VerifierSpec
    evidence: list[Evidence]
    source: list[SourceRef]
    lineage: Lineage
    schema_version: str = SCHEMA_VERSION
    workspace: Workspace | None = None
    environment: ToolEnvironment | None = None  # tool-replay tasks
    world: WorldSetup | None = None  # tool-use tasks on a simulated world

    @property
    def question(self) -> str:
        """The last user message of the prompt: what the task asks."""
        return next(m.content for m in reversed(self.prompt) if m.role == "user")

    @staticmethod
    def make_id(
        kind: str,
        prompt: list[Message],
        answer: str,
        verifier: VerifierSpec,
        workspace: Workspace | None = None,
        environment: ToolEnvironment | None = None,
        world: WorldSetup | None = None,
    ) -> str:
        """The content hash; a document task's hash leaves out the unset fields of other kinds,
        so it is the same as before they existed."""
        parts: list[Any] = [kind, [m.model_dump() for m in prompt], answer, hashed_spec(verifier)]
        if workspace is not None:
            parts.append(workspace)
        if environment is not None:
            parts.append(environment)
        if world is not None:
            parts.append(world)
        return content_id(*parts)


def hashed_spec(verifier: VerifierSpec) -> dict[str, Any]:
    """The verifier as task ids hash it, in the shape of the single model that held every
    type's fields before the union, so that ids do not change: `type`, `f1_threshold`,
    `context` and `rubric` always (at that model's defaults where the type has none), every
    other field only where it differs from its default."""
    legacy = {"f1_threshold": 0.6, "context": [], "rubric": []}
    return {
        **legacy,
        **verifier.model_dump(mode="json", exclude_defaults=True),
        "type": verifier.type,
    }


class Verdict(Record):
    """One judge's decision on one check of one task."""

    verdict_id: str
    task_id: str
    check: Literal["open_book", "closed_book", "trace_outcome", "instruction"]
    judge: str
    judge_model: str
    prompt_version: str
    decision: Literal["pass", "fail", "error"]  # error: the judge gave no usable verdict
    confidence: float | None
    reason: str
    response: str
    usage: Usage


class Consensus(Record):
    """The panel's combined decision on one check of one task."""

    task_id: str
    check: Literal["open_book", "closed_book", "trace_outcome", "instruction"]
    rule: str
    decision: Literal["pass", "fail", "undecided"]
    passes: int
    fails: int
    errors: int
    agreement: float


# a code task's admission gates, in the order they are taken (`judges.unit_tests`)
GateName = Literal[
    "reference",
    "fresh_runs",
    "outside_check",
    "empty_attempt",
    "do_nothing",
    "mutants",
    "red_team",
]


class Gate(Record):
    """One admission gate a code task was put through (`judges.unit_tests`) and what it saw;
    `share` where the gate measures one (fresh runs passed, mutants its tests killed)."""

    task_id: str
    gate: GateName
    passed: bool
    detail: str
    share: float | None = None


class VerdictRerun(Record):
    """One judge's verdict re-asked with another seed, beside the verdict it gave first."""

    rerun_id: str
    task_id: str
    check: Literal["open_book", "closed_book", "trace_outcome", "instruction"]
    judge: str
    judge_model: str
    seed: int
    temperature: float
    decision: Literal["pass", "fail", "error"]
    original: Literal["pass", "fail", "error"]
    run_id: str


class Attempt(Record):
    """One solver rollout on one task, with its reward."""

    attempt_id: str
    task_id: str
    index: int
    harness: str
    solver_model: str
    temperature: float
    seed: int
    response: str
    reward: float
    usage: Usage
    reason: str = ""  # why the verifier gave this reward ("exact match", "token F1 0.67 >= 0.6")
    rollout_id: str = ""  # the proxy's rollout holding this attempt's model calls
    # what it was made for: `calibrate` (or `calibrate:<solver>`), or an evaluation
    # (`evaluate:k<K>:<policy>`); None: made before attempts named their stage (calibration)
    stage: str | None = None


class ProxyCall(Record):
    """One chat completion that went through the interception proxy, request and response.

    `rollout_id` groups the calls of one rollout (an `X-Rollout-Id` header, else a hash of the
    API key). An SDK retry resends the same body and replaces the failed attempt's record.
    """

    call_id: str
    rollout_id: str
    started_at: datetime
    model: str
    messages: str  # JSON: the request's messages, tool results included
    params: str  # JSON: sampling and tool settings (temperature, seed, n, tools, ...)
    response: str  # JSON: the choices as returned (assembled from the stream when streamed)
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    status: int  # HTTP status returned to the client (502: upstream unreachable)
    error: str
    stream: bool
    retry: int  # the SDK's retry count of the recorded attempt


class Difficulty(Record):
    """The solver's measured pass rate on one task, and the band it puts the task in.

    A row is keyed by what measured it: the calibrate stage (`calibrate`, or `calibrate:<solver>`
    for a re-calibration), the solver and the harness. With the adaptive method `band` is the
    sequential rule's decision under its prior, which can differ from a threshold on the raw
    `pass_rate` for tasks near a band edge.
    """

    task_id: str
    solver_model: str
    harness: str
    # None: measured before rows named their stage (`data.funnel.MEASURED_BY` matches those)
    stage: str | None = None
    n: int
    passes: int
    pass_rate: float
    pass_at_k: float  # pass@n: at least one of the n attempts passed (unbiased estimate)
    ci_low: float
    ci_high: float
    confidence: float
    band: Band
    pool: Pool
    learnability: float
    method: str = "fixed"  # "adaptive" or "fixed"
    prior: str = ""  # adaptive: "jeffreys" or "empirical:<tasks it was learnt from>"
    temperature: float | None = None  # the solver's sampling settings
    max_tokens: int | None = None


class Evaluation(Record):
    """A policy's pass rate on one split of a taskset version (`foundry evaluate`): k attempts
    per task in each task's own environment, graded by its family's verifier. The per-task
    results are the `difficulty` rows of its `stage`, the attempts those of the same stage."""

    evaluation_id: str  # hashes the taskset version, split, stage
    taskset: str  # name/version, e.g. `docqa/v0003`
    split: str
    policy: str  # the policy's label (`data.served_policy`)
    policy_spec: str  # as it was named
    stage: str  # `evaluate:k<K>:<policy>`
    k: int
    tasks: int  # tasks of the split evaluated
    missing: int  # tasks of the split this lake does not hold or could not evaluate
    attempts: int
    passes: int
    pass_rate: float  # passes / attempts (every task weighs k)
    ci_low: float  # Wilson interval over the attempts
    ci_high: float
    confidence: float
    by_kind: dict[str, list[int]]  # kind -> [attempts, passes]
    recorded_at: datetime


class LoopRound(Record):
    """One round of `foundry loop`: the taskset version it exported (measured against the
    round's policy), the policy it trained from it, their held-out pass rates, and what the
    new policy's failures made for the next round."""

    round_id: str  # hashes the loop and the round
    loop: str  # the loop's name (its taskset is `<export name>-<loop>`)
    round: int  # 1, 2, ...
    taskset: str  # name/version of the round's export
    tasks: int
    train_tasks: int
    eval_tasks: int
    policy: str  # the label of the policy the round started from
    trained: str  # the label of the policy it made (or was given)
    trained_spec: str  # how the loop names it (a model folder, `MODEL@URL`, ...)
    k: int  # attempts per eval task
    before: float | None  # the held-out pass rate of `policy`; None: no eval task
    after: float | None  # of `trained`
    before_ci: list[float]  # [low, high]
    after_ci: list[float]
    difference: float | None  # mean per-task difference, after minus before
    difference_ci: list[float]  # its bootstrap interval ([] without one)
    steered: dict[str, int]  # the steering stage's outcomes (`status:reason` -> tasks)
    targets: dict[str, int]  # failure kind -> tasks made to target it
    episodes: int  # rollouts of the trained policy ingested as traces
    recorded_at: datetime


class JudgeControl(Record):
    """One judge's accuracy on control items made from the run's chunks (`judges.controls`):
    questions whose answer the passage shows, which it must answer, and wrong answers, which it
    must reject."""

    control_id: str  # hashes the role, model, prompts and number of items
    role: str  # `judge:<n>`
    model: str
    items: int
    correct: int
    unanswered: int  # items it gave no reply to (counted wrong)
    accuracy: float
    threshold: float  # `[verify] control_accuracy`
    competent: bool
    by_kind: dict[str, list[int]]  # "answer" / "reject" -> [items, correct]
    recorded_at: datetime


class SplitAssignment(Record):
    """Which side of the train/eval split a group of related tasks is on (`data.splits`): kept
    in the lake so that every later export of any taskset puts the group on the same side."""

    group_key: str  # e.g. `document:<source_id>`, `commit:<sha>`, `intent:<label>`
    split: Literal["train", "eval"]
    eval_share: float  # the share the group was assigned under
    assigned_at: datetime


class RubricItem(Record):
    """One checkable item a correct answer meets, distilled from one failed solver attempt."""

    rubric_id: str
    task_id: str
    item: str  # e.g. "fills the blank with 1887"
    category: str  # the kind of failure: wrong_answer, no_answer, several_answers, ...
    failure: str  # what went wrong in the attempt it came from, in the judge's words
    attempt_id: str
    judge_model: str
    prompt_version: str


HackPattern = Literal[
    "hedged_list",  # answers and rubric-graded replies
    "echoes_question",
    "format_gaming",
    "padding",
    "special_cases_tests",  # code
    "weakens_checks",
    "call_spam",  # tool calls
    "out_of_scope_calls",
    "other",
]


class HackVerdict(Record):
    """One judge's view of whether a rewarded attempt truly does what the task asks."""

    verdict_id: str
    task_id: str
    attempt_id: str
    judge: str
    judge_model: str
    prompt_version: str
    decision: Literal["genuine", "hack", "error"]  # error: the judge gave no usable verdict
    pattern: HackPattern | None
    reason: str


class Review(Record):
    """What reviewing a calibrated task found: rubric items, reward hacks and the remedy.

    A remedy is a tighter verifier that rejects every flagged attempt and still accepts the gold;
    it makes a new task (`remedied_task_id`) that goes through verification again. When no
    remedy holds, or its family has none (code and tool-use tasks: `no_remedy`), the task stays
    `hackable` and is exported with that flag.
    """

    task_id: str
    rubric_items: int
    checked_attempts: int
    hack_attempts: list[str]
    hackable: bool
    remedy: Remedy
    remedied_task_id: str
    rubric_error: str  # why no rubric came back, if the judge's replies were unusable


class Status(Record):
    """The outcome of one item at one stage; the latest row per (stage, item_id) wins.

    `failed` (e.g. the LLM kept erroring) is retried by the next run; `done` and `rejected` are
    final.
    """

    stage: str
    item_id: str
    status: ItemStatus
    reason: str
    detail: str
    run_id: str
    recorded_at: datetime

    @classmethod
    def now(
        cls, stage: str, item_id: str, status: ItemStatus, reason: str, detail: str, run_id: str
    ) -> Status:
        """A status recorded at this moment (details are capped at 2,000 characters)."""
        return cls(
            stage=stage,
            item_id=item_id,
            status=status,
            reason=reason,
            detail=detail[:2000],
            run_id=run_id,
            recorded_at=utcnow(),
        )


class LLMCall(Record):
    """Usage of one LLM request (cache hits included, flagged)."""

    call_id: str
    run_id: str
    role: str
    model: str
    cached: bool
    ok: bool
    error: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost_usd: float
    recorded_at: datetime
