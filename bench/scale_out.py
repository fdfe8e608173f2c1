"""Scale-out: `foundry run` wall time with one batch at a time vs. several at once.

One fake OpenAI server (the deterministic `Oracle`, a fixed latency per request, so the models
are the bottleneck as real ones are) serves every run. Each run is a fresh home on the same
sample documents with small batches and a low request limit per server (which the batches at
once share), under each `[runner]`:

- threads, 1 worker: the default, one batch at a time (the baseline);
- threads, N workers: N batches at once in the flow's process;
- dask, N workers: N batches at once on a local Dask cluster of N worker processes.

Every run must make the same requests (same count) as the baseline; the times include starting
the process, Prefect and (for Dask) the cluster.

Run from the repository root: `.venv/bin/python bench/scale_out.py --latency 0.2 --workers 4`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.fakes.oracle import Oracle  # noqa: E402

FOUNDRY = Path(sys.executable).parent / "foundry"


def timed_run(
    server: FakeOpenAIServer, work: Path, docs: Path, name: str, runner: str, args
) -> tuple[float, int]:
    """Wall seconds of one `foundry run` under `runner` settings, and the requests it made."""
    config = work / f"{name}.toml"
    config.write_text(
        f"batch_size = {args.batch_size}\n"
        f"[generate]\nmax_chunks = {args.chunks}\n"
        "[calibrate]\nk = 4\n"
        f"[roles.generator]\nmax_concurrency = {args.concurrency}\n"
        f"[[roles.judges]]\nmax_concurrency = {args.concurrency}\n"
        f"[roles.solver]\nmax_concurrency = {args.concurrency}\n"
        f"[runner]\n{runner}\n"
    )
    env = {
        **os.environ,
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "bench",
        "PREFECT_HOME": str(work / "prefect"),
    }
    before = len(server.requests)
    argv = [str(FOUNDRY), "run", "--home", str(work / name), "--config", str(config), str(docs)]
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - start, len(server.requests) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per request")
    parser.add_argument("--workers", type=int, default=4, help="batches at once")
    parser.add_argument("--chunks", type=int, default=16, help="chunks to generate from")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument(
        "--concurrency", type=int, default=4, help="requests in flight per server, all batches"
    )
    args = parser.parse_args()
    runners = {
        "threads x1": 'kind = "threads"\nworkers = 1',
        f"threads x{args.workers}": f'kind = "threads"\nworkers = {args.workers}',
        f"dask x{args.workers}": f'kind = "dask"\nworkers = {args.workers}',
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAIServer(Oracle(), latency_s=args.latency) as server,
    ):
        work = Path(tmp)
        docs = work / "docs"
        shutil.copytree(ROOT / "data" / "samples" / "docs", docs)
        results = {
            name: timed_run(server, work, docs, name.replace(" ", "-"), runner, args)
            for name, runner in runners.items()
        }
    base_time, base_requests = results["threads x1"]
    print(
        f"{args.chunks} chunks, batches of {args.batch_size}, {args.latency:.2f} s per request,"
        f" at most {args.concurrency} requests in flight per server"
    )
    print(f"{'runner':<12} {'wall s':>8} {'requests':>9} {'req/s':>7} {'speed-up':>9}")
    for name, (seconds, requests) in results.items():
        same = "" if requests == base_requests else f"  (baseline made {base_requests})"
        print(
            f"{name:<12} {seconds:>8.1f} {requests:>9} {requests / seconds:>7.1f}"
            f" {base_time / seconds:>8.2f}x{same}"
        )


if __name__ == "__main__":
    main()
