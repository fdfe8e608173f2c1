"""World tool use: an instruction to carry out on a simulated world (DuckDB tables behind
tools), worked backwards from the state the gold calls leave.

Environment: the solver calling the world's tools on its own copy of the world, through native
tool calls (`world_tools`) where its server returns them, else one JSON action per turn
(`world_actions`; `[worlds] protocol` overrides the choice). Verify: the verifier's
self-check on the world (a replay, no model), then the judge panel on whether the instruction
asks for what the gold calls do. Reviewed for reward hacks: the panel compares a rewarded
attempt's calls with the gold ones (`judges.hacks.CALLS`); no remedy exists. Its ladder chains
more goals, plants distractors and describes records instead of naming them. Generation: the
`trace_worlds` stage builds worlds from the traces' tool calls (beside those ingested from
specs), then the `world_tasks` stage plants tasks on each (`families.world_stages`).
"""

from __future__ import annotations

import asyncio

from data.config import CalibrateConfig, FoundryConfig
from data.lake import Direction, Task
from data.llm import Endpoint, LLMClient
from families.base import Checked, Family, Grader, Services
from families.world_stages import TRACE_WORLDS, WORLD_TASKS
from generators import world_tasks
from generators.knobs import Level
from harnesses import world_agent
from harnesses.base import Harness
from judges import hacks, instruction, world_state
from judges.score import Score

OUTCOMES = {
    "pass": ("done", "accepted"),
    "fail": ("rejected", "instruction_not_faithful"),
    "undecided": ("failed", "judge_error"),
}


class WorldToolUse(Family[None, None]):
    """Its hooks read nothing but the task (it carries its world)."""

    kinds = (world_tasks.KIND,)
    card = "world_tool_use"
    stages = (TRACE_WORLDS, WORLD_TASKS)
    ladder = world_tasks.LADDER
    audit = hacks.CALLS

    def environment(self, task: Task, config: FoundryConfig, solver: Endpoint) -> str:
        return world_agent.environment_for(solver, config.worlds.protocol)

    def harness(self, name: str, services: Services) -> Harness:
        return world_agent.WorldTools(name)

    def attempt_config(self, config: FoundryConfig) -> CalibrateConfig:
        per_turn = {"max_tokens": config.worlds.attempt_max_tokens}
        return config.calibrate.model_copy(update=per_turn)

    def grader(self, services: Services) -> Grader | None:
        return _replayed

    async def verify(self, task: Task, loaded: None, llm: LLMClient, services: Services) -> Checked:
        failure = await asyncio.to_thread(world_state.task_self_check, task)
        if failure is not None:
            return Checked("rejected", "world_self_check", failure)
        verdicts, consensus = await instruction.check(task, llm, services.config.verify)
        problems = "; ".join(v.reason for v in verdicts if v.decision == "fail")
        state, reason = OUTCOMES[consensus.decision]
        return Checked(state, reason, problems, verdicts, [consensus])

    async def variant(
        self,
        task: Task,
        level: Level,
        direction: Direction,
        material: None,
        llm: LLMClient,
        services: Services,
    ) -> Task:
        return await world_tasks.make_variant(task, level, direction, llm, services.config.worlds)


async def _replayed(task: Task, completion: str) -> Score:
    """A tool-use attempt replayed on its world (off the event loop: it runs DuckDB)."""
    return await asyncio.to_thread(world_state.grade, task, completion)


FAMILY = WorldToolUse()
