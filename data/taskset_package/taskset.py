"""A taskfoundry taskset as a verifiers v1 taskset: the tasks of the parquet file beside this
module, scored by the exact/F1 matcher shipped beside it; no model, no network.

This file is copied as it is into each exported package (`data/projections.py`); it imports
only the verifiers library, pyarrow and the package's own modules.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import verifiers.v1 as vf

from .answer_match import match

TASKS = Path(__file__).resolve().parent / "tasks.parquet"


class TaskfoundryData(vf.TaskData):
    """One exported task: the prompt (in TaskData), its gold answer and verifier spec, and the
    calibration's pass rate, band and prime-rl pool."""

    answer: str
    verifier: dict[str, Any]
    kind: str
    pass_rate: float
    band: str
    pool: str


class TaskfoundryTask(vf.Task[TaskfoundryData]):
    @property
    def key(self) -> str:
        """The task's content hash from taskfoundry: durable across exports."""
        return self.data.id or self.hash

    def grade(self, reply: str) -> float:
        """1.0 if `reply` matches the gold answer as the verifier spec says, else 0.0. A
        verifier with rubric items (mined from failed or gamed attempts) takes exact matches
        only, as taskfoundry's own verifier does without its judge panel."""
        spec = self.data.verifier
        reward, _, exact = match(
            reply, self.data.answer, float(spec.get("f1_threshold", 0.6)), spec.get("context", [])
        )
        return 1.0 if reward == 1.0 and (exact or not spec.get("rubric")) else 0.0

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return self.grade(trace.last_reply or "")

    async def validate(self, runtime: vf.Runtime | None = None) -> bool:
        """The gold answer scores 1; an empty reply and every known wrong answer score 0."""
        wrong = ["", *self.data.verifier.get("negatives", [])]
        return self.grade(self.data.answer) == 1.0 and not any(self.grade(w) for w in wrong)


class TaskfoundryConfig(vf.TasksetConfig):
    data_path: str | None = None
    """A tasks parquet file to read instead of the one shipped in the package."""


class TaskfoundryTaskset(vf.Taskset[TaskfoundryTask, TaskfoundryConfig]):
    def load(self) -> Iterator[TaskfoundryTask]:
        path = Path(self.config.data_path) if self.config.data_path else TASKS
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
            )
            yield TaskfoundryTask(data, self.config.task)
