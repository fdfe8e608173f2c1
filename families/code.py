"""What the code families share: a workspace in the task's repository, the unit-test verifier.

Environment: `code_single_turn`, one reply whose edits are applied to the workspace; the task's
tests then run in the sandbox. Verify: the gold patch must pass the tests the task names (the
gold self-check; the tests stand in for the judge panel). Reviewed for reward hacks: the panel
compares a rewarded attempt's edits with the reference change (`judges.hacks.CODE`); no remedy
exists, so a hacked task stays hackable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from data.config import CalibrateConfig, FoundryConfig
from data.endpoints import Endpoint
from data.lake import Lake
from data.llm import LLMClient
from data.records import Direction, Task
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


class CodeFamily(Family):
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

    async def verify(self, task: Task, passage: str, llm: LLMClient, services: Services) -> Checked:
        admission = await services.unit_tests.self_check(task, mutants_of_change)
        if admission.failure is not None:
            failure = admission.failure
            return Checked("rejected", failure.reason, failure.detail, gates=admission.gates)
        return Checked("done", "gold_self_check_passed", admission.summary, gates=admission.gates)


async def variant_in_sandbox(
    make: MakeVariant, task: Task, level: Level, direction: Direction, services: Services
) -> Task:
    """A code generator's `make_variant` (blocking: it runs the tests in the sandbox), off the
    event loop, with the task's repository, the sandbox's limits and the prompt's budget."""
    repo = repo_of(services.lake, task)
    limits, max_chars = services.limits, services.config.code.max_prompt_chars
    return await asyncio.to_thread(make, task, level, direction, repo, limits, max_chars)


def repo_of(lake: Lake, task: Task) -> RepoAtHead:
    """The repository of a code task, at the revision the task is built on."""
    workspace = task.workspace
    rows = lake.rows(
        "SELECT * FROM repos WHERE repo_id = ?", [workspace.repo_id if workspace else ""]
    )
    if workspace is None or not rows:
        raise LookupError(f"task {task.task_id}: its repository is not in the lake")
    return repo_at(rows[0], workspace.base)


def repo_at(row: dict[str, Any], rev: str) -> RepoAtHead:
    """A `repos` row's repository at `rev`."""
    language = language_named(row["language"])
    return RepoAtHead(row["repo_id"], row["origin"], Path(row["mirror"]), rev, language)
