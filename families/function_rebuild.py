"""Function rebuild: a function body removed from a repository whose tests cover it; the tests
that then fail must pass again. Its ladder moves the removed code's size and whether the tests
are shown (`generators.function_rebuild`); a variant is checked in the sandbox. See
`families.code`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from data.lake import Direction, Task
from data.llm import LLMClient
from families.base import Services
from families.code import Checkout, CodeFamily, variant_in_sandbox
from families.code_stages import Made, RepositoryStage
from families.stage import SandboxStage, StageContext, pending_items
from generators import function_rebuild
from generators.function_rebuild import RepoAtHead, rebuild_tasks
from generators.knobs import Level

KIND = "function_rebuild"


def pending_rebuilds(ctx: StageContext) -> list[str]:
    """Repositories whose functions have not been tried yet (none if `code.max_functions` is
    0 or function-rebuild tasks are out of scope)."""
    if ctx.config.code.max_functions == 0 or not ctx.config.scope.makes(KIND):
        return []
    return pending_items(ctx, "rebuild", "SELECT repo_id AS id FROM repos ORDER BY repo_id")


def rebuild_functions(ctx: StageContext) -> Counter:
    """Try each pending repository's functions (`generators.function_rebuild`) and record the
    tasks, each candidate's outcome (stage `rebuild_target`) and the repository's."""

    def make(repo: RepoAtHead, ctx: StageContext) -> Iterable[Made]:
        code = ctx.config.code
        return rebuild_tasks(repo, ctx.limits, code.max_functions, code.max_prompt_chars)

    stage = RepositoryStage("rebuild", "rebuilt", "no_covered_function", "function-rebuild")
    return stage.run(ctx, pending_rebuilds(ctx), make)


REBUILD = SandboxStage(
    "rebuild",
    pending_rebuilds,
    rebuild_functions,
    help="function-rebuild tasks: take covered functions' bodies out, in the sandbox",
)


class FunctionRebuild(CodeFamily):
    kinds = (KIND,)
    sandbox_stages = (REBUILD,)
    ladder = function_rebuild.LADDER

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
            function_rebuild.make_variant, task, level, direction, material, services
        )


FAMILY = FunctionRebuild()
