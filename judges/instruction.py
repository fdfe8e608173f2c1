"""The instruction check of a planted tool-use task: does the user's request ask for what the
gold calls do?

A world task's verifier is exact (the world decides), but its instruction is written by the
generator model, and the deterministic checks only see that it states the values the solver
needs. Each judge of the panel sees the request and what fulfils it (the gold calls with the
tools' descriptions, and the value asked for) and votes faithful or not with the problem in one
sentence; the configured consensus rule decides, as for answerability. A request with
judge-directed instructions in it (`judges.injection`) is unfaithful without a judge being
asked. A panel left open by errors is `undecided` and the task is retried by a later run; a
panel whose every judge is below its control bar is not asked, and the task is held
(`judges.panel.Held`).
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from data.config import VerifyConfig
from data.lake import Consensus, Task, Verdict
from data.llm import LLMClient
from data.prompts import chat_messages, escape, load_prompt
from harnesses.world import world_spec
from judges.consensus import rule_from
from judges.injection import injection
from judges.panel import panel_records, panel_votes, refused_votes

SYSTEM = load_prompt(__file__, "instruction_system")
USER = load_prompt(__file__, "instruction_user")
CHECK = "instruction"


class InstructionVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    faithful: StrictBool
    problem: str = Field(default="", max_length=300)


def fulfilment(task: Task) -> str:
    """What fulfils a world task, for a judge: each gold call with its tool's description, and
    the value the user asks for."""
    tools = {tool.name: tool.description for tool in world_spec(task).tools}
    lines = [
        f"- call {call.name} with {json.dumps(call.arguments, ensure_ascii=False)}:"
        f" {tools.get(call.name, '')}"
        for call in task.verifier.tool_calls
    ]
    asks = str(task.lineage.knobs.get("asks", ""))
    if task.answer:
        lines.append(f"- then tell the user the {asks.replace('_', ' ')}: {task.answer}")
    return "\n".join(lines)


async def check(
    task: Task, llm: LLMClient, config: VerifyConfig
) -> tuple[list[Verdict], Consensus]:
    """The panel's verdicts on the task's instruction and their consensus."""
    if found := injection(task.question):
        votes = refused_votes(llm, f"injection: {found}")
    else:
        user = USER.render(instruction=escape(task.question), plan=escape(fulfilment(task)))
        votes = await panel_votes(
            llm,
            chat_messages(SYSTEM, user),
            InstructionVerdict,
            lambda v: v.faithful,
            lambda v: "faithful" if v.faithful else v.problem.strip(),
        )
    return panel_records(task.task_id, CHECK, votes, llm, SYSTEM.version, rule_from(config))
