"""The task: a prompt, its known answer, the verifier spec that grades it, and where it came
from."""

from __future__ import annotations

from typing import Any

from data.lake.records.base import SCHEMA_VERSION, Message, Record, content_id
from data.lake.records.specs import VerifierSpec, hashed_spec
from data.lake.records.values import (
    Evidence,
    Lineage,
    SourceRef,
    ToolEnvironment,
    Workspace,
    WorldSetup,
)


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
