"""Function rebuild: a function body removed from a repository whose tests cover it; the tests
that then fail must pass again. Its ladder moves the removed code's size and whether the tests
are shown (`generators.function_rebuild`); a variant is checked in the sandbox. See
`families.code`."""

from __future__ import annotations

from data.llm import LLMClient
from data.records import Direction, Task
from families.base import Services
from families.code import CodeFamily, variant_in_sandbox
from generators import function_rebuild
from generators.doc_qa_variants import Material
from generators.knobs import Level


class FunctionRebuild(CodeFamily):
    kinds = ("function_rebuild",)
    ladder = function_rebuild.LADDER

    async def variant(
        self,
        task: Task,
        level: Level,
        direction: Direction,
        material: Material,
        llm: LLMClient,
        services: Services,
    ) -> Task:
        return await variant_in_sandbox(
            function_rebuild.make_variant, task, level, direction, services
        )


FAMILY = FunctionRebuild()
