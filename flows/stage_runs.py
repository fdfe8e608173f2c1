"""How a stage runs: its pending items in batches, each batch's items concurrently, its
shards written outputs first, then status, then LLM usage; a stop request ends a batch at once;
the stages go round again while one derives new tasks; no batch starts once the budget is spent.
The solver sits behind the interception proxy, which records every rollout's calls."""

from __future__ import annotations

import asyncio
import secrets
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from data.lake import (
    LLMCall,
    Record,
    latest_controls,
)
from data.llm import CURRENT_ITEM, Endpoint, LLMClient
from data.runtime import interrupt
from data.runtime.errors import ReasonedError
from data.runtime.interrupt import Interrupted
from families.stage import (
    LLMStage,
    Outcome,
    StageContext,
    batches,
)
from flows.review_stages import DERIVED, REMEDY_ROUNDS
from harnesses.proxy import ACCESS_HEADER, is_loopback, running_proxy
from judges import controls

PROGRESS_EVERY_S = 15.0
STOP_POLL_S = 0.2  # how often a batch checks whether the process was asked to stop

BatchRunner = Callable[[LLMStage, list[list[str]]], Iterable[Counter]]
"""Runs a stage's batches (some at once, in any order) and yields each one's counts as it
finishes; it starts none once the run's budget is spent."""


@contextmanager
def solver_through_proxy(
    ctx: StageContext, endpoints: dict[str, Endpoint]
) -> Iterator[dict[str, Endpoint]]:
    """The endpoints with the solver behind the interception proxy, which records every
    rollout's calls in the lake (`proxy_calls`, grouped by the attempt's rollout id). A proxy
    that listens beyond loopback (`[runner] proxy_host`, for workers on other hosts) gets a
    fresh access key for the run, which only the solver endpoint carries."""
    solver = endpoints["solver"]
    host = ctx.config.runner.proxy_host
    access_key = None if is_loopback(host) else secrets.token_urlsafe(24)
    with running_proxy(
        solver.base_url,
        ctx.lake,
        ctx.run_id,
        api_key=solver.api_key,
        host=host,
        timeout_s=solver.timeout_s,
        access_key=access_key,
    ) as url:
        headers = ((ACCESS_HEADER, access_key),) if access_key else ()
        behind = replace(solver, base_url=url, headers=headers, upstream=solver.server)
        yield {**endpoints, "solver": behind}


def run_llm_batch(
    stage: LLMStage, items: list[str], ctx: StageContext, endpoints: dict[str, Endpoint]
) -> Counter:
    """Process `items` concurrently (bounded by the client) and write the batch's shards.

    An expected failure (an LLM's, no sandbox for code: `ReasonedError`) marks only that item
    `failed` with its reason; any other exception is recorded
    the same way (`internal_error`, with the exception's last line) so one bad item never stops
    the run.
    """
    inputs = stage.load(ctx, items)
    finished = 0
    last_report = time.monotonic()

    async def attempt(item: str, client: LLMClient) -> Outcome:
        CURRENT_ITEM.set(item)  # this item's asyncio task only: its calls name it
        try:
            if item not in inputs:
                return Outcome(ctx.status(stage.name, item, "rejected", "input_missing"))
            return await stage.work(ctx, item, inputs[item], client)
        except Interrupted:
            raise  # not finished: pending for the next run
        except ReasonedError as exc:  # an LLM's failure, no sandbox for code, ...
            return Outcome(ctx.status(stage.name, item, "failed", exc.reason, exc.detail))
        except Exception as exc:  # noqa: BLE001 - recorded, visible in `foundry stats`
            last = traceback.format_exception_only(exc)[-1].strip()
            return Outcome(ctx.status(stage.name, item, "failed", "internal_error", last))

    async def guarded(item: str, client: LLMClient) -> Outcome:
        nonlocal finished, last_report
        outcome = await attempt(item, client)
        finished += 1
        if time.monotonic() - last_report >= PROGRESS_EVERY_S:
            last_report = time.monotonic()
            ctx.progress(f"{stage.name}: {finished}/{len(items)} items of this batch")
        return outcome

    if not stage.every_judge:
        endpoints, _ = controls.deciding_judges(endpoints, latest_controls(ctx.lake))

    async def run_all() -> tuple[list[Outcome], list[LLMCall]]:
        """Every item's outcome; on a stop request, those of the items finished by then."""
        client = LLMClient(endpoints, ctx.cache, ctx.run_id, ctx.budget, stage.name)
        tasks = [asyncio.create_task(guarded(item, client)) for item in items]
        try:
            await _until_done_or_stopped(tasks)
        finally:
            await client.aclose()
        finished = [
            t.result() for t in tasks if t.done() and not t.cancelled() and t.exception() is None
        ]
        return finished, client.drain_calls()

    outcomes, calls = asyncio.run(run_all())
    tables: dict[str, list[Record]] = {}
    for outcome in outcomes:
        for table, records in outcome.records.items():
            tables.setdefault(table, []).extend(records)
    for table, records in tables.items():
        ctx.lake.write(table, records, ctx.run_id)
    ctx.lake.write("status", [s for o in outcomes for s in (*o.parts, o.status)], ctx.run_id)
    ctx.lake.write("llm_calls", calls, ctx.run_id)
    if len(outcomes) < len(items):
        raise Interrupted(f"{stage.name}: stopped with {len(outcomes)} of {len(items)} items done")
    return Counter(f"{o.status.status}:{o.status.reason}" for o in outcomes)


async def _until_done_or_stopped(tasks: list[asyncio.Task]) -> None:
    """Wait for `tasks`; when the process is asked to stop, cancel those still running."""
    pending = set(tasks)
    while pending:
        _, pending = await asyncio.wait(pending, timeout=STOP_POLL_S)
        if pending and interrupt.requested():
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            return


def one_at_a_time(
    ctx: StageContext, run_batch: Callable[[LLMStage, int, list[str]], Counter]
) -> BatchRunner:
    """The batch runner that runs each batch with `run_batch`, one after another."""

    def run(stage: LLMStage, groups: list[list[str]]) -> Iterator[Counter]:
        for index, group in enumerate(groups):
            if ctx.budget.exhausted:
                return
            yield run_batch(stage, index, group)

    return run


def run_stages(stages: Sequence[LLMStage], ctx: StageContext, run_batches: BatchRunner) -> dict:
    """Run `stages` in order over their pending items, in batches (a stage ends when all its
    batches have); go round again while a stage derives new tasks (a remedy of the review, a
    variant of the repair), so they are verified and calibrated in the same run. A round takes
    only items no earlier round took, so an item that failed waits for the next run, as does
    what the last round leaves. Once the run's budget is spent no further batch starts: what is
    left stays pending."""
    summary: dict[str, Counter] = {stage.name: Counter() for stage in stages}
    taken: dict[str, set[str]] = {stage.name: set() for stage in stages}
    for _ in range(1 + REMEDY_ROUNDS + ctx.config.repair.max_steps):
        derived = 0
        for stage in stages:
            items = [item for item in stage.pending(ctx) if item not in taken[stage.name]]
            taken[stage.name].update(items)
            groups = batches(items, ctx.config.batch_size)
            done = 0
            for finished, counts in enumerate(run_batches(stage, groups), start=1):
                summary[stage.name].update(counts)
                derived += sum(counts.get(key, 0) for key in DERIVED)
                done += sum(counts.values())
                ctx.progress(f"{stage.name}: batch {finished}/{len(groups)} ({done}/{len(items)})")
            if ctx.budget.exhausted:
                ctx.progress(f"budget reached ({ctx.budget.describe()}): the rest waits")
                return summary
        if not derived:
            break
    return summary
