"""The stage protocol: the run's context, an item's outcome, the shape of an LLM stage and of a
sandbox stage.

It lives below `flows` so that a family can declare the stages that make its candidates
(`Family.stages`); the flows run them. No Prefect here: stages are plain functions over the
lake, so tests need no server.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from data.config import FoundryConfig
from data.costs import Budget
from data.documents import Progress
from data.lake import ItemStatus, Lake, Record, Status, Task
from data.llm import LLMClient, ResponseCache
from data.runtime.sandbox import Limits
from generators.candidates import Candidate, Rejection
from harnesses.base import Harness
from judges import calibration
from judges.unit_tests import UnitTests

# the evaluation stages' name prefix (`evaluate:k<K>:<policy>`): their attempts are a policy's
EVALUATE = "evaluate"


def quiet(message: str) -> None:
    """The progress sink that drops every line (a module function, so a context pickles)."""


@dataclass
class StageContext:
    """What every stage needs: where the lake is, the settings, the run, a progress sink."""

    lake: Lake
    config: FoundryConfig
    run_id: str
    progress: Progress = quiet
    plans: dict[str, calibration.Planner] = field(default_factory=dict)  # by solver
    harnesses: dict[str, Harness] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)  # the run's LLM spend against its limits
    # sandbox stage -> {"items": n, "seconds": s} it took in this run (the run's summary keeps
    # it; `foundry run --plan` estimates sandbox time from it)
    sandbox_time: dict[str, dict[str, float]] = field(default_factory=dict)
    _unit_tests: UnitTests | None = None

    @property
    def cache(self) -> ResponseCache:
        return ResponseCache(self.config.home / "cache" / "llm")

    @property
    def limits(self) -> Limits:
        """The sandbox limits for code from ingested repositories."""
        return Limits(**self.config.sandbox.model_dump(exclude={"parallel"}))

    @property
    def unit_tests(self) -> UnitTests:
        """The code tasks' verifier, over the mirrors of the repositories in the lake."""
        if self._unit_tests is None:
            rows = self.lake.rows("SELECT repo_id, mirror FROM repos")
            mirrors = {r["repo_id"]: Path(r["mirror"]) for r in rows}
            parallel = self.config.sandbox.parallel or max(1, (os.cpu_count() or 2) // 2)
            self._unit_tests = UnitTests(mirrors, self.limits, parallel)
        return self._unit_tests

    def __getstate__(self) -> dict[str, Any]:
        """What another process (a Dask worker) gets: the per-process caches stay behind."""
        return {**self.__dict__, "plans": {}, "harnesses": {}, "_unit_tests": None}

    def status(
        self, stage: str, item_id: str, status: ItemStatus, reason: str, detail: str = ""
    ) -> Status:
        return Status.now(stage, item_id, status, reason, detail, self.run_id)


@dataclass
class Outcome:
    """What processing one item produced: its status (plus those of its parts, e.g. the
    candidates of a chunk) and records per table."""

    status: Status
    records: dict[str, list[Record]] = field(default_factory=dict)
    parts: list[Status] = field(default_factory=list)


Input = TypeVar("Input")


@dataclass(frozen=True)
class LLMStage(Generic[Input]):
    """An LLM stage: which items are pending, how a batch's inputs load (one typed `Input` per
    item id; an item without one is rejected as `input_missing`), how one item is done."""

    name: str
    pending: Callable[[StageContext], list[str]]
    load: Callable[[StageContext, list[str]], Mapping[str, Input]]
    work: Callable[[StageContext, str, Input, LLMClient], Awaitable[Outcome]]
    independent_batches: bool = True  # False: a batch reads what earlier ones wrote
    every_judge: bool = False  # True: judges below their controls' bar take part too
    help: str = ""  # what it does, for its command (`foundry <name>`); "": it has none


@dataclass(frozen=True)
class SandboxStage:
    """A stage that runs ingested code in the sandbox, with no LLM: its pending items, and the
    run over all of them (it writes its own shards and statuses; counts by outcome). The
    pipeline runs these before the LLM stages, whose items they make."""

    name: str
    pending: Callable[[StageContext], list[str]]
    run: Callable[[StageContext], Counter]
    help: str  # what it does, for its command (`foundry <name>`)


def batches(items: Sequence[str], size: int) -> list[list[str]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def kinds_in_scope(ctx: StageContext, column: str = "kind") -> str:
    """A SQL condition on `column` that holds for the task kinds in scope."""
    kinds = ctx.config.scope.kinds
    return "TRUE" if kinds is None else kind_in(kinds, column)


def kind_in(kinds: Sequence[str], column: str = "kind") -> str:
    """A SQL condition: `column` is one of `kinds` (none: never)."""
    return f"{column} IN ({', '.join(repr(str(kind)) for kind in kinds)})" if kinds else "FALSE"


def within_cap(ctx: StageContext, stage: str, items: Sequence[str], cap: int | None) -> list[str]:
    """Those of `items` (in the order they are to be taken) that `stage` has not finished, as
    many as `cap` leaves room for. A cap counts in all: every item `stage` has finished, in this
    run or any before it, whatever the scope, uses up room; None is no cap."""
    finished = ctx.lake.finished_items(stage)
    waiting = [item for item in items if item not in finished]
    return waiting if cap is None else waiting[: max(0, cap - len(finished))]


def pending_in_window(ctx: StageContext, stage: str, sql: str, cap: int | None = None) -> list[str]:
    """The ids `sql` selects (as `id`, with the item's time as `at`) that fall in the scope's
    window and that `stage` has not finished, in `sql`'s order, within `cap` (`within_cap`)."""
    window = [row["id"] for row in ctx.lake.rows(sql) if ctx.config.scope.covers(row["at"])]
    return within_cap(ctx, stage, window, cap)


def pending_items(ctx: StageContext, stage: str, sql: str) -> list[str]:
    """The ids `sql` selects (as `id`) that `stage` has not finished, in its order."""
    return unfinished(ctx, stage, [row["id"] for row in ctx.lake.rows(sql)])


def unfinished(ctx: StageContext, stage: str, items: Sequence[str]) -> list[str]:
    """Those of `items` that `stage` has not finished, in their order."""
    finished = ctx.lake.finished_items(stage)
    return [item for item in items if item not in finished]


def candidates_outcome(
    ctx: StageContext, stage: str, item: str, part_stage: str, results: list[Candidate | Rejection]
) -> Outcome:
    """A generator's results for `item`: each candidate's status under `part_stage`
    (`item#candidate`), the tasks made, and the item done if any was made."""
    tasks = [r.task for r in results if isinstance(r, Candidate)]
    parts = [
        ctx.status(part_stage, f"{item}#{r.candidate}", "done", "generated", r.task.task_id)
        if isinstance(r, Candidate)
        else ctx.status(part_stage, f"{item}#{r.candidate}", "rejected", r.reason, r.detail)
        for r in results
    ]
    state, reason = ("done", "generated") if tasks else ("rejected", "no_valid_candidate")
    status = ctx.status(stage, item, state, reason, f"{len(tasks)} of {len(results)}")
    return Outcome(status, {"tasks": tasks}, parts)


def load_tasks(ctx: StageContext, task_ids: list[str]) -> dict[str, Task]:
    """The tasks of `task_ids`, by id."""
    tasks = ctx.lake.records("tasks", "list_contains(?, task_id)", [task_ids])
    return {t.task_id: t for t in tasks}
