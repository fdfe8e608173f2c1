"""Trace stages: ingest production traces, cluster their requests into named intents, and
turn rated traces into tasks (the LLM stages of the trace families, `families.traces`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import families
from data.lake import Intent, Record, Task, Trace, content_id
from data.llm import LLMClient, LLMError, as_matrix, embed, near_duplicates
from families.stage import LLMStage, Outcome, StageContext, pending_in_window
from generators.checks import CheckFailure
from generators.intents import EXAMPLE_CHARS, EXAMPLES, cluster_requests, label_cluster
from generators.trace_tasks import answer_task, near_miss_task, replay_task
from judges.trace_outcome import rate

# intents: every ingested trace's request -> clusters named by the generator model


def current_clustering(ctx: StageContext) -> str:
    """The id of a clustering of the traces now in the lake with the configured distance."""
    ids = [r["trace_id"] for r in ctx.lake.rows("SELECT trace_id FROM traces ORDER BY 1")]
    return content_id("intents", ids, ctx.config.traces.cluster_distance) if ids else ""


def pending_intents(ctx: StageContext) -> list[str]:
    if not ctx.config.scope.makes(*families.kinds_running(INTENTS)):
        return []
    clustering = current_clustering(ctx)
    if not clustering or clustering in ctx.lake.finished_items("intents"):
        return []
    return [clustering]


def load_requests(ctx: StageContext, items: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Every trace's request and its embedding, for the one clustering item."""
    rows = ctx.lake.rows("SELECT trace_id, request, embedding FROM traces ORDER BY trace_id")
    return {items[0]: rows} if items else {}


async def cluster_intents(
    ctx: StageContext, clustering: str, rows: list[dict[str, Any]], client: LLMClient
) -> Outcome:
    vectors = as_matrix([r["embedding"] for r in rows])
    clusters = cluster_requests(vectors, ctx.config.traces.cluster_distance)
    requests = [r["request"] for r in rows]

    async def named(members: list[int]) -> tuple[str, str]:
        inside = set(members)
        others = [request for i, request in enumerate(requests) if i not in inside]
        return await label_cluster([requests[i] for i in members], others, client, clustering)

    names = await asyncio.gather(*(named(c.members) for c in clusters))
    intents = [
        Intent(
            clustering_id=clustering,
            cluster=number,
            label=label,
            named_by=named_by,
            size=len(cluster.members),
            share=len(cluster.members) / len(rows),
            trace_ids=[rows[i]["trace_id"] for i in cluster.members],
            examples=[requests[i][:EXAMPLE_CHARS] for i in cluster.members[:EXAMPLES]],
        )
        for number, (cluster, (label, named_by)) in enumerate(zip(clusters, names, strict=True))
    ]
    detail = f"{len(intents)} intents over {len(rows)} traces"
    return Outcome(
        ctx.status("intents", clustering, "done", "clustered", detail), {"intents": intents}
    )


INTENTS = LLMStage(
    "intents",
    pending_intents,
    load_requests,
    cluster_intents,
    help="cluster the traces' requests and name each cluster's intent",
)


# trace_tasks: rated trace -> reference, near-miss and tool-replay tasks


def pending_trace_tasks(ctx: StageContext) -> list[str]:
    """Traces in the scope's window not yet through `trace_tasks`, in id order, within
    `traces.max_traces` (none when no trace kind is in scope)."""
    if not ctx.config.scope.makes(*families.kinds_running(TRACE_TASKS)):
        return []
    sql = "SELECT trace_id AS id, occurred_at AS at FROM traces ORDER BY trace_id"
    return pending_in_window(ctx, "trace_tasks", sql, ctx.config.traces.max_traces)


@dataclass(frozen=True)
class TraceInput:
    trace: Trace
    duplicate_of: str  # an earlier trace (by id) asking nearly the same, or ""
    known: np.ndarray  # prompts of existing tasks from other traces or sources, embedded
    known_ids: list[str]


def load_traces(ctx: StageContext, trace_ids: list[str]) -> dict[str, TraceInput]:
    """Each trace with what deduplication needs: the trace whose request it nearly repeats
    (cosine >= `duplicate_threshold` to one earlier in id order) and the existing tasks'
    prompts, embedded."""
    threshold = ctx.config.traces.duplicate_threshold
    rows = ctx.lake.rows("SELECT trace_id, embedding FROM traces ORDER BY trace_id")
    order = [r["trace_id"] for r in rows]
    matches = near_duplicates(as_matrix([r["embedding"] for r in rows]), as_matrix([]), threshold)
    kept = [tid for tid, match in zip(order, matches, strict=True) if match is None]
    duplicate_of = {
        tid: kept[match[0]] for tid, match in zip(order, matches, strict=True) if match is not None
    }
    batch = set(trace_ids)
    others = [
        t for t in ctx.lake.records("tasks") if not t.source or t.source[0].source_id not in batch
    ]
    known = embed([t.question for t in others])
    traces = ctx.lake.records("traces", "list_contains(?, trace_id)", [trace_ids])
    return {
        t.trace_id: TraceInput(
            t, duplicate_of.get(t.trace_id, ""), known, [o.task_id for o in others]
        )
        for t in traces
    }


async def trace_tasks_one(
    ctx: StageContext, trace_id: str, loaded: TraceInput, client: LLMClient
) -> Outcome:
    trace = loaded.trace
    if loaded.duplicate_of:
        return Outcome(
            ctx.status(
                "trace_tasks", trace_id, "rejected", "near_duplicate_request", loaded.duplicate_of
            )
        )
    rating = await rate(trace, client)
    records: dict[str, list[Record]] = {
        "verdicts": rating.verdicts,
        "consensus": [rating.consensus],
    }
    if rating.outcome == "undecided":
        return Outcome(ctx.status("trace_tasks", trace_id, "failed", "judge_error"), records)

    async def replay() -> Task:
        return replay_task(trace, client.model("generator"))

    makers: dict[str, Callable[[], Awaitable[Task]]] = {}
    if rating.outcome == "good":
        makers["trace_answer"] = lambda: answer_task(trace, client)
        if trace.tool_calls:
            makers["tool_replay"] = replay
    else:
        makers["near_miss"] = lambda: near_miss_task(trace, rating.failures, client)
    tasks, parts = [], []
    for kind, make in makers.items():
        item = f"{trace_id}#{kind}"
        try:
            task = await make()
        except CheckFailure as failure:
            parts.append(ctx.status("trace_candidate", item, "rejected", failure.reason))
            continue
        except LLMError as error:
            if error.reason != "invalid_structured_output":
                raise
            parts.append(
                ctx.status("trace_candidate", item, "rejected", error.reason, error.detail)
            )
            continue
        duplicate = _duplicate_task(task, loaded, ctx.config.traces.duplicate_threshold)
        if duplicate:
            parts.append(
                ctx.status("trace_candidate", item, "rejected", "near_duplicate_task", duplicate)
            )
            continue
        tasks.append(task)
        parts.append(ctx.status("trace_candidate", item, "done", "generated", task.task_id))
    state, reason = ("done", rating.outcome) if tasks else ("rejected", "no_valid_candidate")
    detail = f"{len(tasks)} of {len(makers)}"
    records["tasks"] = tasks
    return Outcome(ctx.status("trace_tasks", trace_id, state, reason, detail), records, parts)


def _duplicate_task(task: Task, loaded: TraceInput, threshold: float) -> str:
    """The id of an existing task whose prompt `task`'s nearly repeats, or ""."""
    if not loaded.known_ids:
        return ""
    [match] = near_duplicates(embed([task.question]), loaded.known, threshold)
    return loaded.known_ids[match[0]] if match is not None else ""


# a batch deduplicates against the tasks of the batches before it: one batch at a time
TRACE_TASKS = LLMStage(
    "trace_tasks",
    pending_trace_tasks,
    load_traces,
    trace_tasks_one,
    independent_batches=False,
    help="rate traces with the judge panel and turn them into tasks",
)
