"""Verdict variance: each judge's open-book verdicts re-asked with other seeds.

A judge whose verdict flips when only its seed changes is measuring its sampler as much as the
task. The judges are asked again with their seed moved by 1, 2, … (at their own temperature, or
one given for the measurement: at temperature 0 most servers ignore the seed) and each new
decision is stored beside the first one.
"""

from __future__ import annotations

from dataclasses import replace

from data.lake import LLMCall, Task, VerdictRerun, content_id
from data.llm import Endpoint, LLMClient, ResponseCache, settle
from judges.answerability import open_book_verdicts


def reseeded(
    endpoints: dict[str, Endpoint], shift: int, temperature: float | None
) -> dict[str, Endpoint]:
    """The endpoints with every judge's seed moved by `shift` (and its temperature replaced)."""
    return {
        role: replace(
            endpoint,
            seed=(endpoint.seed or 0) + shift,
            temperature=endpoint.temperature if temperature is None else temperature,
        )
        if role.startswith("judge:")
        else endpoint
        for role, endpoint in endpoints.items()
    }


async def reask(
    tasks: list[tuple[Task, str]],
    original: dict[tuple[str, str], str],
    endpoints: dict[str, Endpoint],
    cache: ResponseCache | None,
    run_id: str,
    seeds: int,
    temperature: float | None = None,
) -> tuple[list[VerdictRerun], list[LLMCall]]:
    """Re-ask the open-book check of `tasks` (task, passage) `seeds` times; `original` maps
    (task_id, judge) to the first decision. Returns the reruns and the LLM usage."""
    reruns: list[VerdictRerun] = []
    calls: list[LLMCall] = []
    for shift in range(1, seeds + 1):
        shifted = reseeded(endpoints, shift, temperature)
        llm = LLMClient(shifted, cache, run_id)
        try:
            panels = await settle([open_book_verdicts(t, p, llm) for t, p in tasks])
        finally:
            await llm.aclose()
        calls.extend(llm.drain_calls())
        for verdict in (v for panel in panels for v in panel):
            first = original.get((verdict.task_id, verdict.judge))
            if first is None:
                continue  # this judge joined the panel after the task was verified
            endpoint = shifted[verdict.judge]
            reruns.append(
                VerdictRerun(
                    rerun_id=content_id(
                        verdict.verdict_id, endpoint.seed, endpoint.temperature, length=20
                    ),
                    task_id=verdict.task_id,
                    check=verdict.check,
                    judge=verdict.judge,
                    judge_model=verdict.judge_model,
                    seed=endpoint.seed or 0,
                    temperature=endpoint.temperature,
                    decision=verdict.decision,
                    original=first,
                    run_id=run_id,
                )
            )
    return reruns, calls
