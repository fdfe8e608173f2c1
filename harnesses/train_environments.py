"""The environments a policy trains in: TRL's `environment_factory` classes, one per tool set.

GRPOTrainer (trl >= 1.16) runs an example's episode in the environment its `environment`
column names: it calls `reset(**row)` on a pooled instance, offers the instance's public methods
as tools (their signatures and docstrings are the JSON schemas the chat template shows), runs
each tool call the policy makes and feeds the result back, until the policy answers. Each
family with tools gets the environment it was calibrated in, built from the exported taskset:

- `doc_search`: `search` and `read` over the taskset's corpus (`data.runtime.corpus_index`, the same
  texts the calibration harness showed);
- `world:<world id>`: the world's tools, each call run on the episode's own DuckDB world at the
  task's initial state (`data.runtime.world_runtime`), at most the task's `max_turns` calls;
- `replay:<hash>`: the tools a production trace offered, each call answered with the result
  recorded in production (`harnesses.tool_replay.replay`).

Every other row trains in `single_turn`, which offers no tools. A world or trace whose tools
cannot be offered as Python methods (a name that is not an identifier, or one the environment
itself uses) is left out of training with its reason, never trained on without its tools.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import keyword
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from data.export import SEARCH_INSTRUCTION, environment_of  # as the package shows it
from data.lake import ToolCall, ToolEnvironment, WorldSetup
from data.runtime.corpus_index import CORPUS_FILE, CorpusIndex
from data.runtime.world_runtime import World, WorldSpec
from harnesses.tool_replay import EXTRA_TURNS, replay

JSON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}
RESERVED = {"reset", "get_reward"}  # names TRL gives their own meaning on an environment
KEYWORD = inspect.Parameter.KEYWORD_ONLY
Row = dict[str, Any]
TOO_MANY_CALLS = "The tool-call limit of this task is reached: reply with your answer."


class SingleTurnEnvironment:
    """A one-reply task's environment: no tools, nothing to reset."""

    def reset(self, **row: Any) -> None:
        return None


class _ToolEnvironment:
    """What every environment with tools shares: a call budget per episode."""

    _budget = 0

    def _spend(self) -> bool:
        """Count a call; False once the episode's budget is spent."""
        self._budget -= 1
        return self._budget >= 0


class DocSearchEnvironment(_ToolEnvironment):
    """`search` and `read` over the exported corpus, as the doc-search harness offers them."""

    index: CorpusIndex
    max_calls: int = 4

    def reset(self, **row: Any) -> str:
        self._budget = self.max_calls
        return "\n\n" + SEARCH_INSTRUCTION.template.strip()

    def search(self, query: str) -> str:
        """Search the documents for the passages that best match the query.

        Args:
            query: a few keywords to look for
        """
        return self.index.search_result(query) if self._spend() else TOO_MANY_CALLS

    def read(self, passage_id: str) -> str:
        """Show a whole passage.

        Args:
            passage_id: the id of a passage, as the search results show it
        """
        return self.index.read_result(passage_id) if self._spend() else TOO_MANY_CALLS


class WorldEnvironment(_ToolEnvironment):
    """A world's tools (added per world by `world_environment`), run on the episode's world."""

    spec: WorldSpec

    def reset(self, **row: Any) -> None:
        setup = WorldSetup.model_validate_json(row["world"])
        self._world = World(self.spec, setup.initial)
        self._budget = setup.max_turns

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if not self._spend():
            return TOO_MANY_CALLS
        return self._world.call(name, arguments).message()


class ReplayEnvironment(_ToolEnvironment):
    """A trace's tools (added per tool set by `replay_environment`), answered from the results
    recorded in production."""

    def reset(self, **row: Any) -> None:
        self._recorded = ToolEnvironment.model_validate_json(row["replay"])
        self._used: set[int] = set()
        self._budget = len(self._recorded.recorded) + EXTRA_TURNS

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if not self._spend():
            return TOO_MANY_CALLS
        return replay(self._recorded, ToolCall(name=name, arguments=arguments), self._used)


def tool_method(name: str, description: str, parameters: dict[str, Any]) -> Callable[..., str]:
    """A method `name` that runs `self._call(name, arguments)`, with the signature and Google
    docstring from which transformers' `get_json_schema` rebuilds the tool's schema (types of
    the top level, descriptions, enums). Raises ValueError for a tool no method can be."""
    if not name.isidentifier() or keyword.iskeyword(name) or name in RESERVED:
        raise ValueError(f"tool name {name!r} cannot be a method")
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    signature = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}  # no return type: the schema shown stays the tool's own
    lines = [" ".join((description or f"The {name} tool.").split())]
    if properties:
        lines += ["", "Args:"]
    for argument, schema in properties.items():
        if not argument.isidentifier() or keyword.iskeyword(argument) or argument == "self":
            raise ValueError(f"argument {argument!r} of tool {name!r} cannot be a parameter")
        kind = JSON_TYPES.get(str(schema.get("type")), str)
        default = inspect.Parameter.empty if argument in required else None
        keyword_only = inspect.Parameter.KEYWORD_ONLY
        signature.append(
            inspect.Parameter(argument, keyword_only, default=default, annotation=kind)
        )
        annotations[argument] = kind
        text = " ".join(str(schema.get("description") or f"the {argument}").split())
        if schema.get("enum"):
            text += f" (choices: {json.dumps(schema['enum'])})"
        lines.append(f"    {argument}: {text}")

    def method(self: Any, **arguments: Any) -> str:
        return self._call(name, arguments)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = "\n".join(lines)
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(signature)  # type: ignore[attr-defined]
    return method


def tools_of(environment: type) -> list[Callable[..., Any]]:
    """The functions of an environment class TRL offers as tools (as it picks them)."""
    return [
        function
        for name, function in inspect.getmembers(environment, predicate=inspect.isfunction)
        if name not in RESERVED and not name.startswith("_")
    ]


def tool_schemas(environment: type) -> list[dict[str, Any]]:
    """The JSON schemas of an environment's tools, as the chat template is shown them."""
    from transformers.utils import get_json_schema

    return [get_json_schema(function) for function in tools_of(environment)]


def world_environment(spec: WorldSpec) -> type[WorldEnvironment]:
    """The environment class of world `spec`: a method per tool."""
    methods = {t.name: tool_method(t.name, t.description, t.parameters) for t in spec.tools}
    return type("WorldEnvironment", (WorldEnvironment,), {**methods, "spec": spec})


def replay_environment(environment: ToolEnvironment) -> type[ReplayEnvironment]:
    """The environment class of a trace's tool set: a method per tool offered."""
    tools = environment.tools
    methods = {t.name: tool_method(t.name, t.description, t.parameters) for t in tools}
    return type("ReplayEnvironment", (ReplayEnvironment,), methods)


def search_environment(index: CorpusIndex, max_calls: int) -> type[DocSearchEnvironment]:
    """The doc-search environment class over `index`."""
    attributes = {"index": index, "max_calls": max_calls}
    return type("DocSearchEnvironment", (DocSearchEnvironment,), attributes)


Calls = list[tuple[str, dict[str, Any]]]


def _spec_calls(row: Row) -> Calls | None:
    """The gold calls a spec that checks calls holds (a world's or a trace's task)."""
    calls = json.loads(row["verifier"]).get("tool_calls")
    if calls is None:
        return None
    return [(c["name"], dict(c.get("arguments") or {})) for c in calls]


def _search_calls(row: Row) -> Calls | None:
    """A doc-search task's gold calls: those its spec checks where it checks calls, else search
    its question and read its evidence passage."""
    if (checked := _spec_calls(row)) is not None:
        return checked
    evidence = json.loads(row["evidence"]) if row.get("evidence") else None
    if not evidence:
        return None
    question = row["prompt"][-1]["content"]
    return [("search", {"query": question}), ("read", {"passage_id": evidence[0]["chunk_id"]})]


def _world_id(row: Row) -> str:
    return WorldSetup.model_validate_json(row["world"]).world_id


def _world_factory(row: Row, version: Path, max_calls: int) -> type[WorldEnvironment]:
    setup = WorldSetup.model_validate_json(row["world"])
    return world_environment(WorldSpec.model_validate_json(setup.spec))


def _tool_set(row: Row) -> str:
    """The id of a trace's tool set: rows offering the same tools share an environment."""
    recorded = ToolEnvironment.model_validate_json(row["replay"])
    tools = json.dumps([t.model_dump() for t in recorded.tools], sort_keys=True)
    return hashlib.sha256(tools.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Training:
    """How the rows of one exported environment train: `kind`, the name of their TRL
    environment (with `:<id>` where the tools differ per world or tool set, `named`), the
    factory of that environment class (from a row, the version, the doc-search call limit),
    and the calls of a row's gold episode for the warm start (None: nothing to warm up on)."""

    kind: str
    named: Callable[[Row], str]
    factory: Callable[[Row, Path, int], Callable[[], Any]]
    gold_calls: Callable[[Row], Calls | None] = _spec_calls


# by the name of the exported environment (`data.export.environments`) whose rows train this way
TRAINING: dict[str, Training] = {
    "world": Training("world", named=lambda row: f"world:{_world_id(row)}", factory=_world_factory),
    "replay": Training(
        "replay",
        named=lambda row: f"replay:{_tool_set(row)}",
        factory=lambda row, version, max_calls: replay_environment(
            ToolEnvironment.model_validate_json(row["replay"])
        ),
    ),
    "search": Training(
        "doc_search",
        named=lambda row: "doc_search",
        factory=lambda row, version, max_calls: search_environment(_corpus(version), max_calls),
        gold_calls=_search_calls,
    ),
    "none": Training(
        "single_turn",
        named=lambda row: "single_turn",
        factory=lambda row, version, max_calls: SingleTurnEnvironment,
        gold_calls=lambda row: None,
    ),
}


@dataclass
class Environments:
    """Every row's environment name, the factories by name, and rows left out by reason."""

    names: list[str | None] = field(default_factory=list)  # None: the row is left out
    factories: dict[str, Callable[[], Any]] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)

    def leave_out(self, reason: str) -> None:
        self.names.append(None)
        self.left_out[reason] = self.left_out.get(reason, 0) + 1


def environments_for(rows: Iterable[dict[str, Any]], version: Path, max_calls: int) -> Environments:
    """The environment of each trainer row of taskset `version`: the training side of the
    row's exported environment (`data.export.environments.environment_of`), or the reason it is left
    out. `max_calls` bounds a doc-search episode, as the calibration's `max_turns` did."""
    found = Environments()
    for row in rows:
        exported = environment_of(exported_view(row))
        try:
            if reason := exported.lacks(row, version):
                raise FileNotFoundError(reason)
            training = TRAINING[exported.name]
            name = training.named(row)
            if name not in found.factories:
                found.factories[name] = training.factory(row, version, max_calls)
        except (ValueError, FileNotFoundError) as error:
            found.leave_out(_reason(error))
            continue
        found.names.append(name)
    return found


def exported_view(row: Row) -> Row:
    """A trainer row as the exported taskset holds it: its tool-replay setup back in the
    `environment` column (TRL reads `environment` as the name of the training environment, so
    the trainer moves the setup to `replay`)."""
    return {**row, "environment": row.get("replay")}


def training_of(name: str) -> Training:
    """The training side of the environment a trainer row is named to (`world:<id>`, ...),
    from `TRAINING` as it is when asked (one added later is found too)."""
    kind = name.split(":", 1)[0]
    return next(training for training in TRAINING.values() if training.kind == kind)


def _corpus(version: Path) -> CorpusIndex:
    table = pq.read_table(version / CORPUS_FILE, columns=["chunk_id", "text"]).to_pylist()
    return CorpusIndex([(r["chunk_id"], r["text"]) for r in table])


def _reason(error: Exception) -> str:
    if isinstance(error, FileNotFoundError):
        return str(error)
    return "tools_not_offerable" if "cannot be" in str(error) else "bad_environment"
