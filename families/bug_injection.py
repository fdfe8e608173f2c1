"""Bug fix: a bug put into a function the tests cover, for repositories whose commits carry no
tests to replay; the tests it breaks must pass again and the others keep passing. Its ladder
moves whether the failing output is shown, how subtle the bug is and how many functions have
one (`generators.bug_injection`); a variant or sibling is checked in the sandbox. See
`families.code`."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable

from data.lake import Direction, Task
from data.llm import LLMClient
from families.base import Services
from families.code import Checkout, CodeFamily, variant_in_sandbox
from families.code_stages import Made, RepositoryStage
from families.stage import SandboxStage, StageContext, pending_items
from generators import bug_injection
from generators.function_rebuild import RepoAtHead
from generators.knobs import Level


def pending_injections(ctx: StageContext) -> list[str]:
    """Repositories not yet given bugs to fix (none if `code.max_bugs` is 0 or bug-fix tasks
    are out of scope)."""
    if ctx.config.code.max_bugs == 0 or not ctx.config.scope.makes(bug_injection.KIND):
        return []
    return pending_items(ctx, "inject", "SELECT repo_id AS id FROM repos ORDER BY repo_id")


def inject_bugs(ctx: StageContext) -> Counter:
    """Put bugs into each pending repository's covered functions (`generators.bug_injection`)
    and record the tasks, each function's outcome (stage `inject_target`) and the
    repository's."""

    def make(repo: RepoAtHead, ctx: StageContext) -> Iterable[Made]:
        code = ctx.config.code
        return bug_injection.inject_tasks(repo, ctx.limits, code.max_bugs, code.max_prompt_chars)

    stage = RepositoryStage("inject", "injected", "no_breaking_mutation", "bug-fix")
    return stage.run(ctx, pending_injections(ctx), make)


INJECT = SandboxStage(
    "inject",
    pending_injections,
    inject_bugs,
    help="bug-fix tasks: put a bug into covered functions, kept where tests fail",
)


class BugInjection(CodeFamily):
    kinds = (bug_injection.KIND,)
    sandbox_stages = (INJECT,)
    ladder = bug_injection.LADDER

    async def variant(
        self,
        task: Task,
        level: Level,
        direction: Direction,
        material: Checkout,
        llm: LLMClient,
        services: Services,
    ) -> Task:
        return await variant_in_sandbox(
            bug_injection.make_variant, task, level, direction, material, services
        )

    async def sibling(
        self, task: Task, material: Checkout, llm: LLMClient, services: Services
    ) -> Task:
        """Another bug in the same function, at `task`'s level: one no task has yet."""
        function = task.lineage.knobs["function"]
        rows = services.lake.rows(
            "SELECT DISTINCT json_extract_string(lineage, '$.knobs.mutation') AS mutation"
            " FROM tasks WHERE kind = ? AND json_extract_string(lineage, '$.knobs.function') = ?",
            [bug_injection.KIND, function],
        )
        taken = frozenset(row["mutation"] for row in rows if row["mutation"])
        level = bug_injection.LADDER.level(str(task.lineage.knobs["level"]))
        return await asyncio.to_thread(
            bug_injection.remake,
            task,
            level,
            material.repo(),
            services.limits,
            services.config.code.max_prompt_chars,
            taken,
        )


FAMILY = BugInjection()
