"""What the code families share: a workspace in the task's repository, the unit-test verifier.

Environment: `code_single_turn`, one reply whose edits are applied to the workspace; the task's
tests then run in the sandbox. Verify: the gold patch must pass the tests the task names (the
gold self-check; the tests stand in for the judge panel; it loads nothing, the unit-test
verifier knows the mirrors). Variants and siblings draw on the task's `Checkout`. Reviewed for
reward hacks: the panel compares a rewarded attempt's edits with the reference change
(`judges.hacks.CODE`); no remedy exists, so a hacked task stays hackable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data.config import CalibrateConfig, FoundryConfig
from data.lake import Direction, Lake, Task
from data.llm import Endpoint, LLMClient
from data.runtime.languages import language_named
from data.runtime.sandbox import Limits
from families.base import Checked, Family, Grader, Services
from generators.function_rebuild import RepoAtHead
from generators.knobs import Level
from generators.mutations import mutants_of_change
from harnesses.base import Harness
from harnesses.single_turn import SingleTurn
from judges import hacks

CODE_SINGLE_TURN = "code_single_turn"
# a code generator's variant maker: (task, level, direction, repository, limits, prompt budget)
MakeVariant = Callable[[Task, Level, Direction, RepoAtHead, Limits, int], Task]


@dataclass(frozen=True)
class Checkout:
    """Where a code task's repository is: its `repos` row (None: the lake has none) and the
    revision the task is built on."""

    task_id: str
    row: dict[str, Any] | None
    rev: str

    def repo(self) -> RepoAtHead:
        """The repository at the task's revision (LookupError: it is not in the lake)."""
        if self.row is None:
            raise LookupError(f"task {self.task_id}: its repository is not in the lake")
        return repo_at(self.row, self.rev)


def checkouts(lake: Lake, tasks: Sequence[Task]) -> dict[str, Checkout]:
    """Each code task's `Checkout`, the repositories read in one go."""
    repo_ids = sorted({t.workspace.repo_id for t in tasks if t.workspace is not None})
    sql = "SELECT * FROM repos WHERE list_contains(?, repo_id)"
    rows = {row["repo_id"]: row for row in lake.rows(sql, [repo_ids])} if repo_ids else {}
    return {
        task.task_id: Checkout(
            task.task_id,
            rows.get(task.workspace.repo_id) if task.workspace is not None else None,
            task.workspace.base if task.workspace is not None else "",
        )
        for task in tasks
    }


class CodeFamily(Family[None, Checkout]):
    card = "code"
    audit = hacks.CODE

    def environment(self, task: Task, config: FoundryConfig, solver: Endpoint) -> str:
        return CODE_SINGLE_TURN

    def harness(self, name: str, services: Services) -> Harness:
        return SingleTurn(name)

    def attempt_config(self, config: FoundryConfig) -> CalibrateConfig:
        return config.calibrate.model_copy(update={"max_tokens": config.code.attempt_max_tokens})

    def grader(self, services: Services) -> Grader | None:
        return services.unit_tests.grade

    async def verify(self, task: Task, loaded: None, llm: LLMClient, services: Services) -> Checked:
        admission = await services.unit_tests.self_check(task, mutants_of_change)
        if admission.failure is not None:
            failure = admission.failure
            return Checked("rejected", failure.reason, failure.detail, gates=admission.gates)
        return Checked("done", "gold_self_check_passed", admission.summary, gates=admission.gates)

    def load_for_variants(
        self, services: Services, tasks: Sequence[Task]
    ) -> Mapping[str, Checkout]:
        return checkouts(services.lake, tasks)


async def variant_in_sandbox(
    make: MakeVariant,
    task: Task,
    level: Level,
    direction: Direction,
    checkout: Checkout,
    services: Services,
) -> Task:
    """A code generator's `make_variant` (blocking: it runs the tests in the sandbox), off the
    event loop, with the task's repository, the sandbox's limits and the prompt's budget."""
    repo = checkout.repo()
    limits, max_chars = services.limits, services.config.code.max_prompt_chars
    return await asyncio.to_thread(make, task, level, direction, repo, limits, max_chars)


def repo_at(row: dict[str, Any], rev: str) -> RepoAtHead:
    """A `repos` row's repository at `rev`."""
    language = language_named(row["language"])
    return RepoAtHead(row["repo_id"], row["origin"], Path(row["mirror"]), rev, language)
