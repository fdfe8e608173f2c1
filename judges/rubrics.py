"""Rubric extraction: what failed solver attempts got wrong, distilled into checkable items.

A judge sees the question, the gold answer and a few distinct failed attempts (escaped, in
numbered blocks) and says, per attempt, which kind of failure it is and, in a few words, what
went wrong. Each kind maps to a rubric item stated in terms of the gold answer ("fills the blank
with 1887", "commits to one answer instead of listing several"), so every item can be checked by
reading an answer, and a judge cannot slip an invented requirement into the verifier. The schema
only admits the attempt numbers the judge was shown, so every item traces back to its attempt.
Items are stored with the task (the `rubrics` table, exported as the `rubric` column) and become
part of the verifier when a reward hack is remedied.

A report task's verifier is already a rubric of facts, judged item by item: its failed attempts
are distilled into the facts they left out (`missed_facts`), as the panel grades them.
"""

from __future__ import annotations

import functools
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from data.lake import Attempt, RubricItem, Task, content_id
from data.llm import LLMClient
from data.prompts import chat_messages, escape, load_prompt
from data.runtime.answer_match import normalize_answer
from judges.injection import injection
from judges.panel import deciding_roles
from judges.rewards import distinct_attempts
from judges.rubric_grade import ITEMS_SYSTEM, ITEMS_USER, item_tallies

SYSTEM = load_prompt(__file__, "rubric_system")
USER = load_prompt(__file__, "rubric_user")
PROMPT_VERSION = content_id(SYSTEM.version, USER.version, length=12)
ITEMS_PROMPT_VERSION = content_id(ITEMS_SYSTEM.version, ITEMS_USER.version, length=12)
MAX_ATTEMPTS = 3
ONE_ANSWER = "commits to one answer instead of listing several"

Category = Literal[
    "wrong_answer", "no_answer", "repeats_question", "extra_text", "several_answers", "wrong_unit"
]


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    category: Category
    failure: str = Field(max_length=200)


def rubric_item(category: str, task: Task) -> str:
    """The checkable item a correct answer meets, for one kind of failure."""
    gold = task.answer
    numeric = any(c.isdigit() for c in gold)
    if category == "wrong_answer":
        if task.verifier.context:
            return f"fills the blank with {gold}"
        return f"gives {gold}" if numeric else f"names {gold}"
    return {
        "no_answer": "commits to an answer",
        "repeats_question": f"states the missing fact ({gold}) instead of repeating the question",
        "extra_text": "gives the short answer alone, without a long explanation",
        "several_answers": ONE_ANSWER,
        "wrong_unit": f"gives the value in the same unit and scale as {gold}",
    }[category]


def failed_examples(attempts: list[Attempt]) -> list[Attempt]:
    """Up to MAX_ATTEMPTS failed attempts with distinct, non-empty answers, in attempt order."""
    return distinct_attempts(attempts, lambda a: a.failed, MAX_ATTEMPTS)


def messages_for(task: Task, failed: list[Attempt]) -> list[dict[str, str]]:
    blocks = "\n\n".join(
        f'<attempt number="{i}">\n{escape(a.response.strip())}\n</attempt>'
        for i, a in enumerate(failed, start=1)
    )
    user = USER.render(question=escape(task.question), gold=escape(task.answer), attempts=blocks)
    return chat_messages(SYSTEM, user)


@functools.cache
def _schema(n_attempts: int) -> type[BaseModel]:
    """The reply schema; `attempt` admits only the numbers of the attempts shown."""
    item = create_model(
        "RubricEntry",
        __base__=_Item,
        attempt=(Literal[tuple(range(1, n_attempts + 1))], ...),
    )
    return create_model(
        "Rubric",
        __config__=ConfigDict(extra="forbid"),
        items=(list[item], Field(min_length=1, max_length=2 * n_attempts)),
    )


async def extract(task: Task, attempts: list[Attempt], llm: LLMClient) -> list[RubricItem]:
    """Rubric items for `task` from its failed attempts ([] when none failed); raises LLMError
    when the judge gives no valid rubric, `judges.panel.Held` when the judges are below the
    control bar."""
    failed = failed_examples(attempts)
    if not failed:
        return []
    role = deciding_roles(llm)[0]
    reply = await llm.structured(
        role, messages_for(task, failed), _schema(len(failed)), max_tokens=160, repairs=1
    )
    model = llm.model(role)
    items: dict[str, RubricItem] = {}
    for entry in reply.items:
        check = rubric_item(entry.category, task)
        if check in items:
            continue
        source = failed[entry.attempt - 1]
        items[check] = RubricItem(
            rubric_id=content_id(task.task_id, source.attempt_id, check),
            task_id=task.task_id,
            item=check,
            category=entry.category,
            failure=_failure_text(entry.failure, entry.category),
            attempt_id=source.attempt_id,
            judge_model=model,
            prompt_version=PROMPT_VERSION,
        )
    return list(items.values())


def _failure_text(text: str, category: str) -> str:
    """The judge's description, or the category's name when it only copied the instructions
    (small models echo the example in the prompt)."""
    text = " ".join(text.split())
    if not normalize_answer(text) or normalize_answer(text) in normalize_answer(SYSTEM.template):
        return category.replace("_", " ")
    return text


async def missed_facts(task: Task, attempts: list[Attempt], llm: LLMClient) -> list[RubricItem]:
    """The rubric items of a `by_item` rubric that `task`'s failed attempts (up to MAX_ATTEMPTS
    distinct replies, none refused for speaking to its judge) left out, each once, with the
    first attempt that missed it; the panel grades as calibration did (its replies come from
    the response cache). Raises LLMError when the panel is left undecided."""
    failed = distinct_attempts(
        attempts,
        lambda a: a.failed and not injection(a.response),
        MAX_ATTEMPTS,
        lambda text: " ".join(text.split()),
    )
    models = "+".join(dict.fromkeys(llm.model(role) for role in llm.judge_roles))
    items: dict[str, RubricItem] = {}
    for attempt in failed:
        tallies = await item_tallies(task, attempt.response, llm)
        for number, (item, tally) in enumerate(zip(task.verifier.rubric, tallies, strict=True), 1):
            if tally.outcome != "fail" or item in items:
                continue
            items[item] = RubricItem(
                rubric_id=content_id(task.task_id, attempt.attempt_id, item),
                task_id=task.task_id,
                item=item,
                category="missed_fact",
                failure=f"leaves out rubric item {number}",
                attempt_id=attempt.attempt_id,
                judge_model=models,
                prompt_version=ITEMS_PROMPT_VERSION,
            )
    return list(items.values())
