"""Orchestration overhead: LLM requests/s of the stage loop vs the same requests sent directly.

One fake OpenAI server (the deterministic `Oracle`, with a fixed latency per request) serves two
phases, side by side in one process:

- pipeline: each LLM stage (`generate`, `verify`, `calibrate`, `review`, `repair`) runs once,
  in order, through the plain stage functions over a lake that `ingest_docs` filled beforehand
  (ingest is not timed; the variants `repair` makes are not taken round again);
- raw: the very requests the pipeline sent, replayed through one `LLMClient` (no cache) with
  the same concurrency limit, all at once;
- flow: the production path on another fresh lake, ingested alike: the `pipeline` flow itself
  (`flows.pipeline.pipeline_flow`, configured from a file) on a local Prefect server, its
  batches Prefect task runs on the configured task runner, the run's artifacts published.
  It takes the repair loop round until nothing is pending, so it sends more requests than the
  plain stages; `flow/raw` compares its LLM stages' span (first request to last reply) with its
  own requests replayed raw. The whole flow's seconds (flow run, export, artifacts) are printed
  beside it.

Several `--latency` values are measured in turn, each on a fresh lake, and compared in a last
table. Run from the repository root: `.venv/bin/python bench/throughput.py --latency 0.05 0.2`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.config import FoundryConfig  # noqa: E402
from data.lake import (  # noqa: E402
    Lake,
    run_usage,
)
from data.llm import (  # noqa: E402
    Endpoint,
    LLMClient,
    LLMError,
)
from families.stage import LLMStage, StageContext, batches  # noqa: E402
from flows.pipeline import pipeline_flow  # noqa: E402
from flows.prefect_server import prefect_api  # noqa: E402
from flows.stage_runs import run_llm_batch, solver_through_proxy  # noqa: E402
from flows.stages import llm_stages  # noqa: E402
from harnesses.proxy import running_proxy  # noqa: E402
from sources.documents import ingest_docs  # noqa: E402
from tests.fakes import openai_server  # noqa: E402
from tests.fakes.oracle import Oracle  # noqa: E402
from tests.fakes.scripted_llm import fake_endpoints  # noqa: E402

TARGET_RATIO = 0.9
DEFAULT_DOCS = ROOT / "data" / "samples" / "docs"


@dataclass
class Phase:
    """One timed phase: how many requests the server received and how long it took."""

    name: str
    requests: int
    start: float
    end: float
    detail: str = ""
    cpu: float = 0.0  # CPU seconds of the whole process (client, proxy and fake server)
    idle: float = 0.0  # share of the time with no request at the server
    full: float = 0.0  # share of the time with `concurrency` requests at the server

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_request(self) -> float:
        """Milliseconds of CPU per request."""
        return 1000 * self.cpu / self.requests if self.requests else 0.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--latency",
        type=float,
        nargs="+",
        default=[0.05],
        help="fake server delay, s; several values measure each in turn, then compare them",
    )
    parser.add_argument("--concurrency", type=int, default=8, help="max_concurrency per server")
    parser.add_argument("--batch-size", type=int, help="default: FoundryConfig().batch_size")
    parser.add_argument("--docs", default=str(DEFAULT_DOCS), help="corpus to ingest")
    args = parser.parse_args(argv)
    if args.concurrency < 1 or (args.batch_size is not None and args.batch_size < 1):
        parser.error("--concurrency and --batch-size must be >= 1")
    return args


def endpoints_for(base_url: str, concurrency: int) -> dict[str, Endpoint]:
    """Every role on the fake server; the client shares one limit of `concurrency` among them."""
    return fake_endpoints(
        base_url,
        model="fake-model",
        max_concurrency=concurrency,
        structured_output="json_schema",
        supports_n=False,
    )


def warm_up(endpoints: dict[str, Endpoint], concurrency: int) -> None:
    """A few requests so that neither phase pays the first-use costs (imports, pools)."""

    async def go() -> None:
        client = LLMClient(endpoints, cache=None)
        try:
            messages = [{"role": "user", "content": "warm-up"}]
            await asyncio.gather(*(client.chat("generator", messages) for _ in range(concurrency)))
        finally:
            await client.aclose()

    asyncio.run(go())


def run_pipeline(
    ctx: StageContext, endpoints: dict[str, Endpoint], server: openai_server.FakeOpenAIServer
) -> tuple[Phase, list[Phase], Counter]:
    """Run the LLM stages batch by batch, exactly as the flows do (minus Prefect): the solver
    behind the recording proxy."""
    outcomes: Counter = Counter()
    stages: list[Phase] = []
    first = len(server.requests)
    started, cpu = time.monotonic(), time.process_time()
    with solver_through_proxy(ctx, endpoints) as proxied:
        for stage in llm_stages():
            stages.append(run_stage(stage, ctx, proxied, server, outcomes))
    requests = len(server.requests) - first
    detail = "LLM stages, plain functions"
    total = Phase(
        "pipeline", requests, started, time.monotonic(), detail, time.process_time() - cpu
    )
    return total, stages, outcomes


def run_stage(
    stage: LLMStage,
    ctx: StageContext,
    endpoints: dict[str, Endpoint],
    server: openai_server.FakeOpenAIServer,
    outcomes: Counter,
) -> Phase:
    stage_start, stage_first, cpu = time.monotonic(), len(server.requests), time.process_time()
    items = stage.pending(ctx)
    groups = batches(items, ctx.config.batch_size)
    for group in groups:
        outcomes.update(run_llm_batch(stage, group, ctx, endpoints))
    name, detail = f"  {stage.name}", f"{len(items)} items, {len(groups)} batches"
    requests = len(server.requests) - stage_first
    return Phase(name, requests, stage_start, time.monotonic(), detail, time.process_time() - cpu)


FLOW_CONFIG = """\
batch_size = {batch_size}

[roles.generator]
{endpoint}
[[roles.judges]]
{endpoint}
[roles.solver]
{endpoint}"""


def run_flow(
    home: Path, args: argparse.Namespace, batch_size: int, server: openai_server.FakeOpenAIServer
) -> tuple[Phase, Phase]:
    """The `pipeline` flow over a lake ingested beforehand: (its LLM stages' span, the whole
    flow)."""
    endpoint = (
        f'base_url = "{server.base_url}"\napi_key = "k"\nmodel = "fake-model"\n'
        f"max_concurrency = {args.concurrency}\njson_schema = true\nsupports_n = false\n"
    )
    config = home / "bench.toml"
    config.write_text(FLOW_CONFIG.format(batch_size=batch_size, endpoint=endpoint))
    first = len(server.requests)
    started, cpu = time.monotonic(), time.process_time()
    summary = pipeline_flow(home=str(home), config=str(config))
    ended, cpu = time.monotonic(), time.process_time() - cpu
    arrivals = server.request_times[first:]
    requests = len(arrivals)
    whole = Phase("flow, whole", requests, started, ended, "pipeline flow run", cpu)
    span_end = max(arrivals) + server.latency_s if arrivals else ended
    detail = f"LLM stages, Prefect task runs; {summary['export']['n_tasks']} tasks exported"
    span = Phase("flow", requests, min(arrivals, default=started), span_end, detail, cpu)
    return span, whole


def replay(
    bodies: list[dict[str, Any]],
    endpoints: dict[str, Endpoint],
    server: openai_server.FakeOpenAIServer,
    name: str = "raw",
) -> tuple[Phase, int]:
    """Send `bodies` again through one LLMClient (no cache), all gathered at once."""

    async def one(client: LLMClient, body: dict[str, Any]) -> bool:
        try:
            await client.chat(
                "generator",
                body["messages"],
                temperature=body.get("temperature", 0.0),
                max_tokens=body.get("max_tokens", 256),
                seed=body.get("seed"),
                response_format=body.get("response_format"),
            )
        except LLMError:
            return False
        return True

    async def go() -> list[bool]:
        client = LLMClient(endpoints, cache=None)
        try:
            return await asyncio.gather(*(one(client, body) for body in bodies))
        finally:
            await client.aclose()

    first = len(server.requests)
    started, cpu = time.monotonic(), time.process_time()
    results = asyncio.run(go())
    detail = "LLMClient.chat, one gather" + (", through the proxy" if name == "proxied" else "")
    requests = len(server.requests) - first
    phase = Phase(name, requests, started, time.monotonic(), detail, time.process_time() - cpu)
    return phase, results.count(False)


def occupancy(phase: Phase, arrivals: list[float], latency: float, limit: int) -> None:
    """Fill `phase.idle` / `phase.full` from the server's arrival times (each request is held
    `latency` s after it arrives): no request in flight is time lost outside the LLM calls."""
    events = sorted([(t, 1) for t in arrivals] + [(t + latency, -1) for t in arrivals])
    idle = full = 0.0
    level, previous = 0, phase.start
    for when, step in events:
        now = min(max(when, phase.start), phase.end)
        if level == 0:
            idle += now - previous
        elif level >= limit:
            full += now - previous
        level, previous = level + step, now
    idle += phase.end - previous if level == 0 else 0.0
    phase.idle, phase.full = idle / phase.seconds, full / phase.seconds


def print_table(phases: list[Phase], ideal: float) -> None:
    head = f"{'phase':<12} {'requests':>8} {'seconds':>8} {'req/s':>8} {'of ideal':>8}"
    print(f"{head} {'idle':>5} {'full':>5} {'cpu ms/req':>10}  notes")
    for p in phases:
        share = p.rate / ideal if ideal else 0.0
        row = f"{p.name:<12} {p.requests:>8} {p.seconds:>8.2f} {p.rate:>8.1f} {share:>8.0%}"
        cpu = f"{p.cpu_per_request:>10.2f}" if p.requests else f"{'':>10}"
        print(f"{row} {p.idle:>5.0%} {p.full:>5.0%} {cpu}  {p.detail}")


@dataclass
class Measurement:
    """The three phases measured at one latency."""

    latency: float
    raw: Phase
    proxied: Phase
    pipeline: Phase
    flow: Phase  # the pipeline flow's LLM stages, with Prefect
    whole_flow: Phase
    flow_raw: Phase  # the flow's own requests, replayed raw

    @property
    def ratio(self) -> float:
        return self.pipeline.rate / self.raw.rate if self.raw.rate else 0.0

    @property
    def flow_ratio(self) -> float:
        return self.flow.rate / self.flow_raw.rate if self.flow_raw.rate else 0.0

    @property
    def proxy_ratio(self) -> float:
        return self.proxied.rate / self.raw.rate if self.raw.rate else 0.0


def measure(latency: float, args: argparse.Namespace, batch_size: int) -> Measurement:
    """Ingest into a fresh lake, run the pipeline, replay its requests raw and proxied; print
    the table for this latency."""
    ideal = args.concurrency / latency if latency > 0 else float("inf")
    print(f"\n=== latency {latency:g} s: ideal {ideal:.1f} req/s (= concurrency / latency)")
    with (
        tempfile.TemporaryDirectory(prefix="foundry-bench-") as home,
        openai_server.FakeOpenAIServer(Oracle(), latency_s=latency) as server,
    ):
        config = FoundryConfig(home=Path(home), batch_size=batch_size)
        lake = Lake(config.home)
        run_id = lake.start_run("bench-throughput")
        ctx = StageContext(lake=lake, config=config, run_id=run_id)
        started = time.monotonic()
        ingested = ingest_docs([args.docs], ctx)
        took = time.monotonic() - started
        print(f"ingest (not timed below): {dict(ingested)} in {took:.1f} s")
        endpoints = endpoints_for(server.base_url, args.concurrency)
        warm_up(endpoints, args.concurrency)

        first = len(server.requests)
        pipeline, stages, outcomes = run_pipeline(ctx, endpoints, server)
        bodies = [dict(body) for body in server.requests[first:]]
        usage = run_usage(lake, run_id)
        lake.finish_run(run_id, "completed", usage)
        raw, raw_failed = replay(bodies, endpoints, server)
        with running_proxy(server.base_url, lake, run_id) as url:
            via, via_failed = replay(
                bodies, endpoints_for(url, args.concurrency), server, "proxied"
            )
        with tempfile.TemporaryDirectory(prefix="foundry-bench-flow-") as flow_home:
            flow_config = FoundryConfig(home=Path(flow_home), batch_size=batch_size)
            flow_lake = Lake(flow_config.home)
            ingest_run = flow_lake.start_run("bench-ingest")
            ingest_docs([args.docs], StageContext(flow_lake, flow_config, ingest_run))
            flow_lake.finish_run(ingest_run, "completed", run_usage(flow_lake, ingest_run))
            flow_first = len(server.requests)
            flow, whole = run_flow(Path(flow_home), args, batch_size, server)
            flow_bodies = [dict(body) for body in server.requests[flow_first:]]
        flow_raw, flow_raw_failed = replay(flow_bodies, endpoints, server, "flow raw")
        times = list(server.request_times)

    for phase in (raw, via, pipeline, *stages, flow_raw, flow):
        arrivals = [t for t in times if phase.start <= t <= phase.end]
        occupancy(phase, arrivals, latency, args.concurrency)
    print_table([raw, via, pipeline, *stages, flow_raw, flow], ideal)
    print(
        f"flow, whole: {whole.seconds:.2f} s (LLM stages {flow.seconds:.2f} s; the rest is the"
        " flow run's start, the export and the artifacts)"
    )
    print(
        "  idle: share of the time with no request at the server (client work, lake I/O and"
        " batch set-up); full: share with all slots busy; cpu: CPU time of this process"
        " (client, proxy and fake server together) per request."
    )
    result = Measurement(latency, raw, via, pipeline, flow, whole, flow_raw)
    verdict = "meets" if result.ratio >= TARGET_RATIO else "BELOW"
    print(f"pipeline/raw = {result.ratio:.2f} (target >= {TARGET_RATIO}: {verdict} target)")
    verdict = "meets" if result.flow_ratio >= TARGET_RATIO else "BELOW"
    print(f"flow/raw = {result.flow_ratio:.2f} (target >= {TARGET_RATIO}: {verdict} target)")
    print(
        f"(the flow takes the repair loop round until nothing is pending: {flow.requests}"
        f" requests to the plain stages' {pipeline.requests}; flow/raw replays its own)"
    )
    print(f"proxied/raw = {result.proxy_ratio:.2f} (what the recording proxy costs)")
    failed = {k: v for k, v in outcomes.items() if k.startswith("failed:")}
    print(f"pipeline outcomes: {dict(sorted(outcomes.items()))}")
    print(
        f"pipeline LLM calls recorded: {usage['calls']} live, {usage['cache_hits']} from cache,"
        f" {usage['errors']} errors; server received {pipeline.requests}"
    )
    if failed or raw_failed or via_failed or flow_raw_failed or usage["errors"]:
        print(
            f"WARNING: failures (pipeline {failed}, raw {raw_failed}, proxied {via_failed},"
            f" flow raw {flow_raw_failed})"
            " make the figures suspect"
        )
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    batch_size = args.batch_size or FoundryConfig().batch_size
    print("config:")
    print(f"  latency        {', '.join(f'{x:g}' for x in args.latency)} s per request")
    print(f"  concurrency    {args.concurrency} requests in flight (max_concurrency)")
    print(f"  batch size     {batch_size} items per stage batch (batches run one after another)")
    print(f"  corpus         {args.docs}")
    with prefect_api() as api:
        print(f"  prefect api    {api} (the flow phase)")
        results = [measure(latency, args, batch_size) for latency in args.latency]

    print()
    head = f"{'latency':>8} {'raw req/s':>10} {'of ideal':>9} {'pipeline/raw':>13}"
    print(
        f"{head} {'flow/raw':>9} {'flow whole s':>13} {'proxied/raw':>12}"
        f" {'cpu ms/req raw, pipeline, flow':>31}"
    )
    for r in results:
        share = r.raw.rate * r.latency / args.concurrency
        cpu = (
            f"{r.raw.cpu_per_request:.2f}, {r.pipeline.cpu_per_request:.2f},"
            f" {r.whole_flow.cpu_per_request:.2f}"
        )
        print(
            f"{r.latency:>8g} {r.raw.rate:>10.1f} {share:>9.0%} {r.ratio:>13.2f}"
            f" {r.flow_ratio:>9.2f} {r.whole_flow.seconds:>13.1f} {r.proxy_ratio:>12.2f} {cpu:>31}"
        )
    print(
        f"note: each stage batch (<= {batch_size} items) finishes before the next starts and an"
        " item's own requests are often sequential (generate: answer then question; verify:"
        " open book then closed book), so the pipeline cannot keep"
        f" {args.concurrency} requests in flight all the time; raw can. That loss is a share of"
        " the time whatever the latency. The client's CPU per request is a fixed cost, so it"
        " weighs more the faster the server answers; the server runs in this process, so both"
        " phases share its CPU (and the GIL) with the client."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
