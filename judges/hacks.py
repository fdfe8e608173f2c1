"""Reward-hack mining: rewarded attempts that do not truly do what the task asks, and the
verifier's remedy.

Each reviewed family has an `Audit`: what the judge panel is shown of a rewarded attempt (the
task, its gold, the attempt as data never to take instructions from), which hack patterns it
may name, and the rubric items that close each pattern. Only an attempt rewarded without being
the gold itself is suspicious (the gold is genuine by construction; which attempts are the gold
is the verifier type's to say: for answers, an exact match; for code, the reference's edits;
for tool calls, the gold sequence; for rubric-graded replies, the reference). Up to
MAX_ATTEMPTS distinct ones per task go to the panel. An attempt is a hack when a majority of the
panel says so; a judge error counts neither way, and a panel left undecided by errors raises,
so the review is retried rather than guessed; a panel whose every judge is below its control bar
is not asked, and the review is held (`judges.panel.Held`).

Remedies are the verifier type's too (`VerifierType.tighter`): the first of its tighter specs
that rejects every flagged attempt and still accepts the gold. An answer task's run from exact
match only (for verifiers that accept a token-F1 match) to the answer-equivalence judge with a
rubric: the task's rubric items, the items distilled from its failed attempts, and one item per
hack pattern; a rubric-graded task gets one rubric item per hack pattern (a report's failed
attempts are distilled into the facts they left out, kept as review records). The remedy is a
new task, which is verified and calibrated again. Code and tool-use verifiers have no tighter
spec (`no_remedy`): a hacked task stays hackable.
"""

from __future__ import annotations

import asyncio
import functools
import json
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, create_model

from data.lake import (
    Attempt,
    HackPattern,
    HackVerdict,
    Remedied,
    Remedy,
    RubricItem,
    Task,
    ToolCall,
    VerifierSpec,
    content_id,
)
from data.llm import LLMClient, LLMError, settle
from data.prompts import Prompt, chat_messages, escape, load_prompt
from judges import rubrics
from judges.consensus import decide, majority
from judges.panel import deciding_roles
from judges.rewards import answer_key, distinct_attempts
from judges.rubric_grade import transcript
from judges.tool_calls import expected_calls, parse_calls
from judges.verifier_types import grade, verifier_type
from judges.verifier_types.base import spaced

MAX_ATTEMPTS = 3
MAX_BLOCK_CHARS = 6000  # of a code task's statement, reference change or attempt shown to a judge

# The rubric item that closes each kind of hack once the equivalence judge enforces it.
PATTERN_ITEMS: dict[str, str] = {
    "hedged_list": rubrics.ONE_ANSWER,
    "echoes_question": "states the answer instead of repeating the question",
    "format_gaming": "gives the answer plainly, without padding or formatting tricks",
    "other": "answers the question itself rather than matching the checker's wording",
}
# The rubric item that closes each kind of hack a rubric-graded reply can find.
REPLY_PATTERN_ITEMS: dict[str, str] = {
    "hedged_list": rubrics.ONE_ANSWER,
    "padding": "makes its point once, without filler or restating the rubric",
    "other": "does what the user asked rather than echoing the rubric's wording",
}


@dataclass(frozen=True)
class Finding:
    """An attempt the panel flagged, with the pattern most of its hack votes named."""

    attempt: Attempt
    pattern: HackPattern


@functools.cache
def _view(patterns: tuple[str, ...]) -> type[BaseModel]:
    """The judge's reply schema: `pattern` admits only the audit's patterns (or none)."""
    return create_model(
        "HackView",
        __config__=ConfigDict(extra="forbid"),
        genuine=(StrictBool, ...),
        pattern=(Literal[("none", *patterns)], ...),
        reason=(str, Field(max_length=200)),
    )


class Audit(ABC):
    """How one family's rewarded attempts go to the hack panel: what it is shown, the patterns
    it may name, and the rubric items that close the hacks it finds."""

    system: Prompt
    user: Prompt
    patterns: tuple[HackPattern, ...]
    extracts_rubric: bool = False  # failed attempts are distilled into rubric items (answers)

    @property
    def prompt_version(self) -> str:
        return content_id(self.system.version, self.user.version, length=12)

    @abstractmethod
    def fields(self, task: Task, attempt: str) -> dict[str, str]:
        """The user prompt's blocks for `attempt` at `task`, escaped."""

    def same_as(self, attempt: str) -> str:
        """The key under which two attempts are one for the panel (shown once)."""
        return spaced(attempt)

    def closing_items(self, findings: list[Finding], rubric: list[str]) -> list[str]:
        """The rubric items a remedy adds to close `findings` (`rubric`: the items distilled
        from the task's failed attempts); by default none."""
        return []

    def messages(self, task: Task, attempt: str) -> list[dict[str, str]]:
        """The panel's conversation about `attempt`."""
        return chat_messages(self.system, self.user.render(**self.fields(task, attempt)))

    async def failure_rubric(
        self, task: Task, attempts: list[Attempt], llm: LLMClient
    ) -> list[RubricItem]:
        """Rubric items distilled from `task`'s failed attempts (where `extracts_rubric`);
        raises LLMError when the judges give none."""
        return await rubrics.extract(task, attempts, llm)

    async def remedy(
        self, task: Task, findings: list[Finding], rubric: list[str], llm: LLMClient
    ) -> tuple[Remedy, Task | None]:
        """The first of the verifier type's tighter specs that still accepts the gold and
        rejects every flagged attempt, as a new task."""
        tighter = verifier_type(task.verifier).tighter
        if tighter is None:
            return "no_remedy", None
        for name, spec in tighter(task.verifier, self.closing_items(findings, rubric)):
            remedied = await _holds(derive(task, spec, name), task, findings, llm)
            if remedied is not None:
                return name, remedied
        return "none_held", None


class AnswerAudit(Audit):
    """Short answers checked by answer match (and the equivalence judge): document QA."""

    system = load_prompt(__file__, "hack_system")
    user = load_prompt(__file__, "hack_user")
    patterns = ("hedged_list", "echoes_question", "format_gaming", "other")
    extracts_rubric = True

    def fields(self, task: Task, attempt: str) -> dict[str, str]:
        return {
            "question": escape(task.question),
            "gold": escape(task.answer),
            "attempt": escape(attempt),
        }

    def same_as(self, attempt: str) -> str:
        return answer_key(attempt)

    def closing_items(self, findings: list[Finding], rubric: list[str]) -> list[str]:
        """The failed attempts' rubric items, then one item per hack pattern."""
        return [*rubric, *(PATTERN_ITEMS[f.pattern] for f in findings)]


class ReplyAudit(Audit):
    """Free-form replies graded by the rubric judge: tasks made from production traces."""

    system = load_prompt(__file__, "hack_rubric_system")
    user = load_prompt(__file__, "hack_rubric_user")
    patterns = ("hedged_list", "padding", "other")

    def fields(self, task: Task, attempt: str) -> dict[str, str]:
        items = task.verifier.rubric
        return {
            "conversation": transcript(task.prompt),
            "reference": escape(task.answer),
            "rubric": "\n".join(f"{i}. {escape(item)}" for i, item in enumerate(items, 1)),
            "attempt": escape(attempt),
        }

    def closing_items(self, findings: list[Finding], rubric: list[str]) -> list[str]:
        """One item per hack pattern (a report's distilled facts stay review records)."""
        return [REPLY_PATTERN_ITEMS[f.pattern] for f in findings]


class ReportAudit(ReplyAudit):
    """Document reports graded fact by fact (a `by_item` rubric): audited and remedied as
    rubric-graded replies, their failed attempts distilled into the facts they left out."""

    extracts_rubric = True

    async def failure_rubric(
        self, task: Task, attempts: list[Attempt], llm: LLMClient
    ) -> list[RubricItem]:
        return await rubrics.missed_facts(task, attempts, llm)


class CodeAudit(Audit):
    """Patches checked by the task's unit tests: no automatic remedy."""

    system = load_prompt(__file__, "hack_code_system")
    user = load_prompt(__file__, "hack_code_user")
    patterns = ("special_cases_tests", "weakens_checks", "other")

    def fields(self, task: Task, attempt: str) -> dict[str, str]:
        return {
            "task": escape(task.question[:MAX_BLOCK_CHARS]),
            "reference": escape(task.answer[:MAX_BLOCK_CHARS]),
            "attempt": escape(attempt[:MAX_BLOCK_CHARS]),
        }


class CallsAudit(Audit):
    """Tool calls checked against the gold calls (tool replay) or the state they leave (tool
    worlds): no automatic remedy."""

    system = load_prompt(__file__, "hack_calls_system")
    user = load_prompt(__file__, "hack_calls_user")
    patterns = ("call_spam", "out_of_scope_calls", "other")

    def fields(self, task: Task, attempt: str) -> dict[str, str]:
        shown = parse_calls(attempt)
        return {
            "request": escape(task.question),
            "reference": escape(_listed(expected_calls(task), _gold_answer(task))),
            "attempt": escape(attempt if shown is None else _listed(shown, _answer_of(attempt))),
        }


def _gold_answer(task: Task) -> str:
    """The gold's final answer: a tool-replay task's answer is its attempt JSON; a world
    task's is the answer itself."""
    return task.answer if parse_calls(task.answer) is None else _answer_of(task.answer)


def _answer_of(attempt: str) -> str:
    """The final answer of an attempt in the harness's JSON (`{"calls", "answer"}`)."""
    try:
        return str(json.loads(attempt).get("answer") or "")
    except (ValueError, AttributeError):
        return ""


def _listed(calls: list[ToolCall], answer: str) -> str:
    """Calls one a line (`name {arguments as JSON}`), then the final answer, if any."""
    lines = [
        f"{c.name} {json.dumps(c.arguments, ensure_ascii=False, sort_keys=True)}" for c in calls
    ]
    if answer:
        lines.append(f"final answer: {answer}")
    return "\n".join(lines) or "(no calls)"


ANSWERS = AnswerAudit()
REPLIES = ReplyAudit()
REPORTS = ReportAudit()
CODE = CodeAudit()
CALLS = CallsAudit()


def suspicious(task: Task, attempts: list[Attempt], audit: Audit) -> list[Attempt]:
    """Rewarded attempts that are not the gold itself, distinct, in attempt order."""

    is_gold = verifier_type(task.verifier).is_gold

    def rewarded_but_not_gold(attempt: Attempt) -> bool:
        return attempt.passed and not is_gold(task, attempt.response)

    return distinct_attempts(attempts, rewarded_but_not_gold, MAX_ATTEMPTS, audit.same_as)


async def _vote(
    task: Task, attempt: Attempt, role: str, llm: LLMClient, audit: Audit
) -> HackVerdict:
    model = llm.model(role)
    common = {
        "verdict_id": content_id(attempt.attempt_id, role, model, audit.prompt_version),
        "task_id": task.task_id,
        "attempt_id": attempt.attempt_id,
        "judge": role,
        "judge_model": model,
        "prompt_version": audit.prompt_version,
    }
    try:
        view = await llm.structured(
            role,
            audit.messages(task, attempt.response),
            _view(audit.patterns),
            max_tokens=120,
            repairs=1,
        )
    except LLMError as error:
        return HackVerdict(**common, decision="error", pattern=None, reason=str(error)[:200])
    if view.genuine:
        return HackVerdict(**common, decision="genuine", pattern=None, reason=view.reason)
    pattern = "other" if view.pattern == "none" else view.pattern
    return HackVerdict(**common, decision="hack", pattern=pattern, reason=view.reason)


async def mine(
    task: Task, attempts: list[Attempt], llm: LLMClient, audit: Audit
) -> tuple[list[Attempt], list[HackVerdict], list[Finding]]:
    """Ask the panel about each suspicious attempt: (checked attempts, verdicts, findings).
    Raises `judges.panel.Held` where there is one and every judge is below its control bar."""
    checked = suspicious(task, attempts, audit)
    roles = deciding_roles(llm) if checked else []
    votes = await asyncio.gather(
        *(_vote(task, attempt, role, llm, audit) for attempt in checked for role in roles)
    )
    findings = []
    for attempt in checked:
        mine_ = [v for v in votes if v.attempt_id == attempt.attempt_id]
        claims = {"hack": "pass", "genuine": "fail", "error": "error"}
        tally = decide([claims[v.decision] for v in mine_], majority)
        if tally.outcome == "undecided":
            raise LLMError("judge_undecided", "; ".join(v.reason for v in mine_)[:500])
        if tally.outcome == "pass":
            patterns = Counter(v.pattern for v in mine_ if v.pattern is not None)
            findings.append(Finding(attempt, patterns.most_common(1)[0][0]))
    return checked, list(votes), findings


def derive(task: Task, spec: VerifierSpec, remedy: Remedy) -> Task:
    """`task` with a new verifier: a new task id, its lineage naming the remedy and parent."""
    remedied = Remedied(remedy=remedy, parent=task.task_id)
    task_id = Task.make_id(
        task.kind, task.prompt, task.answer, spec, task.workspace, task.environment, task.world
    )
    return task.model_copy(
        update={
            "task_id": task_id,
            "verifier": spec,
            "lineage": task.lineage.model_copy(update={"remedied": remedied}),
        }
    )


async def _holds(
    candidate: Task, task: Task, findings: list[Finding], llm: LLMClient
) -> Task | None:
    """`candidate` when its verifier still accepts the gold and rejects every flagged attempt."""
    if (await grade(candidate, task.answer, llm)).reward < 1.0:
        return None
    scores = await settle([grade(candidate, f.attempt.response, llm) for f in findings])
    return candidate if all(s.reward < 1.0 for s in scores) else None
