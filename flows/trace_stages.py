"""Trace stages: ingest production traces, cluster their requests into named intents."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from data.embeddings import as_matrix
from data.llm import LLMClient
from data.records import Intent, content_id
from data.trace_ingest import ingest_traces
from flows.context import LLMStage, Outcome, StageContext
from generators.intents import cluster_requests, label_cluster


def ingest_trace_files(paths: list[str], ctx: StageContext) -> Counter:
    """Read, scrub, embed and store the traces under `paths`; record every input's outcome."""
    return ingest_traces(paths, ctx.lake, ctx.config.traces, ctx.run_id, ctx.progress)


# intents: every ingested trace's request -> clusters named by the generator model


def current_clustering(ctx: StageContext) -> str:
    """The id of a clustering of the traces now in the lake with the configured distance."""
    ids = [r["trace_id"] for r in ctx.lake.rows("SELECT trace_id FROM traces ORDER BY 1")]
    return content_id("intents", ids, ctx.config.traces.cluster_distance) if ids else ""


def pending_intents(ctx: StageContext) -> list[str]:
    clustering = current_clustering(ctx)
    if not clustering or clustering in ctx.lake.finished_items("intents"):
        return []
    return [clustering]


def load_requests(ctx: StageContext, items: list[str]) -> dict[str, Any]:
    rows = ctx.lake.rows("SELECT trace_id, request, embedding FROM traces ORDER BY trace_id")
    return {items[0]: rows} if items else {}


async def cluster_intents(
    ctx: StageContext, clustering: str, rows: Any, client: LLMClient
) -> Outcome:
    vectors = as_matrix([r["embedding"] for r in rows])
    clusters = cluster_requests(vectors, ctx.config.traces.cluster_distance)
    requests = [r["request"] for r in rows]

    async def named(members: list[int]) -> tuple[str, str]:
        others = [requests[i] for i in range(len(rows)) if i not in set(members)]
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
            examples=[requests[i][:240] for i in cluster.members[:5]],
        )
        for number, (cluster, (label, named_by)) in enumerate(zip(clusters, names, strict=True))
    ]
    detail = f"{len(intents)} intents over {len(rows)} traces"
    return Outcome(
        ctx.status("intents", clustering, "done", "clustered", detail), {"intents": intents}
    )


INTENTS = LLMStage("intents", pending_intents, load_requests, cluster_intents)
