"""Rating a production trace's outcome: did the assistant's final reply serve the user?

The judge panel sees the scrubbed conversation (tool calls and results included) and the final
reply, and each judge votes good or bad with a one-line failure; a final reply with
judge-directed instructions in it (`judges.injection`) is bad without a judge being asked. The
majority decides, as for answerability; a panel left open by errors is `undecided` and the
trace is retried later, and a panel whose every judge is below its control bar is not asked:
the trace is held (`judges.panel.Held`). A good trace becomes a reference task; a bad one a
near-miss task naming its failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from data.lake import Consensus, Trace, Verdict
from data.llm import LLMClient
from data.prompts import chat_messages, escape, load_prompt, render_conversation
from judges.consensus import majority
from judges.injection import injection
from judges.panel import panel_records, panel_votes, refused_votes

SYSTEM = load_prompt(__file__, "trace_outcome_system")
USER = load_prompt(__file__, "trace_outcome_user")
CHECK = "trace_outcome"


class OutcomeVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    good: StrictBool
    failure: str = Field(default="", max_length=300)


@dataclass(frozen=True)
class Rating:
    outcome: Literal["good", "bad", "undecided"]
    failures: list[str]  # what the judges who voted bad said went wrong
    verdicts: list[Verdict]
    consensus: Consensus


async def rate(trace: Trace, llm: LLMClient) -> Rating:
    """The panel's rating of the trace's final reply."""
    if found := injection(trace.answer):
        votes = refused_votes(llm, f"injection: {found}")
    else:
        user = USER.render(
            conversation=render_conversation(trace.messages[:-1]), answer=escape(trace.answer)
        )
        votes = await panel_votes(
            llm,
            chat_messages(SYSTEM, user),
            OutcomeVerdict,
            lambda v: v.good,
            lambda v: v.failure.strip() if not v.good else "good",
        )
    verdicts, consensus = panel_records(
        trace.trace_id, CHECK, votes, llm, SYSTEM.version, ("majority", majority)
    )
    outcome = {"pass": "good", "fail": "bad", "undecided": "undecided"}[consensus.decision]
    failures = [v.reason for v in votes if v.decision == "fail" and v.reason]
    return Rating(outcome, failures, verdicts, consensus)  # type: ignore[arg-type]
