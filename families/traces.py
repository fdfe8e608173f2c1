"""What the trace families share: a task made from a production conversation, whose trace the
judge panel rated when it was made.

Generation: the `intents` stage names the clusters of the traces' requests, then the
`trace_tasks` stage rates each trace and makes its reference, near-miss and tool-replay tasks
(`families.trace_stages`). Verify: the verifier's self-check (the gold passes, a perturbed
answer fails). Attempts get the longer replies conversations need. Reviewed for reward hacks:
the reply families by the rubric's terms (remedied with a rubric item per hack pattern), tool
replay by its calls (no remedy).
"""

from __future__ import annotations

from data.config import CalibrateConfig, FoundryConfig
from data.lake import Task
from data.llm import LLMClient
from families.base import Checked, Family, Services
from families.trace_stages import INTENTS, TRACE_TASKS
from judges.selfcheck import self_check


class TraceFamily(Family[None, None]):
    """Its hooks read nothing but the task (it carries the conversation)."""

    card = "traces"
    stages = (INTENTS, TRACE_TASKS)
    from_traces = True

    def attempt_config(self, config: FoundryConfig) -> CalibrateConfig:
        update = {"max_tokens": config.traces.attempt_max_tokens}
        return config.calibrate.model_copy(update=update)

    async def verify(self, task: Task, loaded: None, llm: LLMClient, services: Services) -> Checked:
        failure = await self_check(task, llm)
        if failure is not None:
            return Checked("rejected", "verifier_self_check", failure)
        return Checked("done", "verifier_self_check_passed")
