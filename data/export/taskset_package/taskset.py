"""A taskfoundry taskset as a verifiers v1 taskset: the tasks of one split (`train.parquet`
beside this module, or `eval.parquet` with `split = "eval"`: tasks related to none of the
train split's), scored without a model or network, each by the grader its verifier type has in
`graders.json` (written from taskfoundry's verifier registry at export):

- `answer`: the exact/F1 matcher (`runtime/answer_match.py`); document-search tasks get the
  search tools of the tool server (`tools`);
- `world`: the conversation's calls replayed on the task's world (`runtime/world_runtime.py`),
  which the tool server ran them on;
- `replay`: the share of expected calls made in order (`runtime/replay_runtime.py`), the tool
  server answering each with its recorded result;
- `code`: the reply tried on the task's repository tree in the sandbox and scored by its tests
  (`code_runtime`).

Each task's turn limit, the one taskfoundry calibrated it with, is a `@vf.stop`.

This file is copied as it is into each exported package (`data/export/verifiers_package.py`); it
imports only the verifiers library, pyarrow and the package's own modules.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pyarrow.parquet as pq
import verifiers.v1 as vf
from verifiers.v1.types import content_text

from .code_runtime import grade_code
from .runtime import replay_runtime
from .runtime.answer_match import match
from .runtime.world_grading import grade_calls
from .runtime.world_runtime import WorldSpec, conversation_attempt
from .tools import TaskToolset

HERE = Path(__file__).resolve().parent
# verifier type -> its grader here (a key of `TaskfoundryTask.GRADERS`), from taskfoundry's registry
GRADER_OF: dict[str, str] = json.loads((HERE / "graders.json").read_text())


class TaskfoundryData(vf.TaskData):
    """One exported task: the prompt (in TaskData), its gold answer and verifier spec, the
    calibration's pass rate, band, prime-rl pool and harness, its turn limit, and (world tasks)
    its world: the spec as JSON text, the initial state and the turn limit; (tool-replay
    tasks) its environment: the tools offered and the results recorded; (code tasks) its
    workspace: repository, base revision, start and hidden test patches."""

    answer: str
    verifier: dict[str, Any]
    kind: str
    pass_rate: float
    band: str
    pool: str
    harness: str = ""
    max_turns: int | None = None
    toolset: str = "none"  # what the tool server offers it: world, replay, search or none
    world: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None
    workspace: dict[str, Any] | None = None


class TaskfoundryTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()
    """Placement of the tool server (world, tool-replay and document-search tasks)."""


class TaskfoundryTask(vf.Task[TaskfoundryData, vf.State, TaskfoundryTaskConfig]):
    @property
    def key(self) -> str:
        """The task's content hash from taskfoundry: durable across exports."""
        return self.data.id or self.hash

    @classmethod
    def toolsets(cls, config: TaskfoundryTaskConfig) -> list[vf.Toolset]:
        """The tool server, per rollout (it offers no tools to a plain answer task)."""
        return [TaskToolset(config.tools)]

    @vf.stop
    async def turn_limit(self, trace: vf.Trace) -> bool:
        """Refuse the model call past the task's turn limit: the attempt ends there."""
        limit = self.data.max_turns
        return limit is not None and trace.num_turns >= limit

    def grade(self, reply: str) -> float:
        """1.0 if `reply` matches the gold answer as the verifier spec says, else 0.0. A
        verifier with rubric items (mined from failed or gamed attempts) takes exact matches
        only, as taskfoundry's own verifier does without its judge panel."""
        spec = self.data.verifier
        threshold, context = float(spec.get("f1_threshold", 0.6)), spec.get("context", [])
        reward, _, exact = match(reply, self.data.answer, threshold, context, self.question)
        return 1.0 if reward == 1.0 and (exact or not spec.get("rubric")) else 0.0

    @property
    def question(self) -> str:
        """What the prompt asks (its last user message), as taskfoundry's reward reads it: an
        answer padded with it scores 0."""
        prompt = self.data.prompt
        if isinstance(prompt, str):
            return prompt
        asked = [content_text(m.content) for m in prompt or [] if m.role == "user"]
        return asked[-1] if asked else ""

    def grade_world(self, messages: list[dict[str, Any]]) -> float:
        """1.0 if the conversation's tool calls, replayed on the task's world from its initial
        state, leave the gold final state (and its last reply matches the gold answer, where
        the task asks a question), else 0.0: taskfoundry's `world_state` verifier."""
        world = self.data.world or {}
        calls, answer = conversation_attempt(messages)
        gold_calls = [(c["name"], dict(c["arguments"])) for c in self.data.verifier["tool_calls"]]
        reward, _ = grade_calls(
            WorldSpec.model_validate_json(world["spec"]),
            world["initial"],
            calls,
            answer,
            gold_calls,
            self.data.verifier["final_state"],
            self.data.answer,
        )
        return reward

    def grade_replay(self, messages: list[dict[str, Any]]) -> float:
        """The share of the expected calls the conversation's tool calls made in order, 0 for a
        net cast for them: taskfoundry's `tool_calls` verifier."""
        calls, _ = conversation_attempt(messages)
        expected = [(c["name"], dict(c["arguments"])) for c in self.data.verifier["tool_calls"]]
        return replay_runtime.grade_calls(calls, expected)[0]

    async def grade_code(self, reply: str) -> float:
        """The reply's edits tried on the task's repository tree in the sandbox, scored by
        its tests: taskfoundry's `unit_tests` verifier."""
        workspace = self.data.workspace or {}
        verifier = self.data.verifier
        return await asyncio.to_thread(grade_code, reply, self.data.answer, verifier, workspace)

    def gold_calls(self) -> list[dict[str, Any]]:
        """The expected calls as assistant turns, one call each."""
        return [{"role": "assistant", "tool_calls": [c]} for c in self.data.verifier["tool_calls"]]

    async def reward_answer(self, reply: str, messages: list[dict[str, Any]]) -> float:
        return self.grade(reply)

    async def reward_world(self, reply: str, messages: list[dict[str, Any]]) -> float:
        return self.grade_world(messages)

    async def reward_replay(self, reply: str, messages: list[dict[str, Any]]) -> float:
        return self.grade_replay(messages)

    async def reward_code(self, reply: str, messages: list[dict[str, Any]]) -> float:
        return await self.grade_code(reply)

    async def validate_answer(self) -> bool:
        """The gold answer scores 1; an empty reply and every known wrong answer score 0."""
        wrong = ["", *self.data.verifier.get("negatives", [])]
        return self.grade(self.data.answer) == 1.0 and not any(self.grade(w) for w in wrong)

    async def validate_world(self) -> bool:
        """The gold calls, then the gold answer, score 1; no calls score 0."""
        gold = [*self.gold_calls(), {"role": "assistant", "content": self.data.answer}]
        return self.grade_world(gold) == 1.0 and self.grade_world([]) == 0.0

    async def validate_replay(self) -> bool:
        """The expected calls score 1; no calls score 0."""
        return self.grade_replay(self.gold_calls()) == 1.0 and self.grade_replay([]) == 0.0

    async def validate_code(self) -> bool:
        """The reference patch, its tests run, scores 1; an empty reply scores 0."""
        gold, empty = await self.grade_code(self.data.answer), await self.grade_code("")
        return gold == 1.0 and empty == 0.0

    # grader -> (its reward of a reply and the conversation's turns, its self-check)
    GRADERS = {
        "answer": (reward_answer, validate_answer),
        "world": (reward_world, validate_world),
        "replay": (reward_replay, validate_replay),
        "code": (reward_code, validate_code),
    }

    @property
    def grader(self) -> str:
        """The task's grader: its verifier type's, from `graders.json`."""
        return GRADER_OF[self.data.verifier.get("type", "exact_or_f1")]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        # every sampled turn, whichever branch it is on: each call ran on the rollout's tools
        messages = [m.model_dump() for m in trace.assistant_messages]
        reward, _ = self.GRADERS[self.grader]
        return await reward(self, trace.last_reply or "", messages)

    async def validate(self, runtime: vf.Runtime | None = None) -> bool:
        """The task's gold scores 1 under its grader, and an empty attempt (and every known
        wrong answer) 0."""
        _, check = self.GRADERS[self.grader]
        return await check(self)


class TaskfoundryConfig(vf.TasksetConfig):
    task: TaskfoundryTaskConfig = TaskfoundryTaskConfig()
    split: Literal["train", "eval"] = "train"
    """Which of the shipped splits to load: `train` to train on, `eval` (held out: tasks related
    to none of the train split's) to measure on."""
    data_path: str | None = None
    """A tasks parquet file to read instead of the shipped split."""


class TaskfoundryTaskset(vf.Taskset[TaskfoundryTask, TaskfoundryConfig]):
    def load(self) -> Iterator[TaskfoundryTask]:
        shipped = HERE / f"{self.config.split}.parquet"
        path = Path(self.config.data_path) if self.config.data_path else shipped
        for row in pq.read_table(path).to_pylist():
            data = TaskfoundryData(
                id=row["task_id"],
                name=row["kind"],
                prompt=row["prompt"],
                answer=row["answer"],
                verifier=json.loads(row["verifier"]),
                kind=row["kind"],
                pass_rate=row["pass_rate"],
                band=row["band"],
                pool=row["pool"],
                harness=row["harness"] or "",
                max_turns=row["max_turns"],
                toolset=row["toolset"],
                world=json.loads(row["world"] or "null"),
                environment=json.loads(row["environment"] or "null"),
                workspace=json.loads(row["workspace"] or "null"),
            )
            yield TaskfoundryTask(data, self.config.task)
