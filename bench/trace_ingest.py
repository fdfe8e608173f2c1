"""Trace ingestion throughput: what reading, scrubbing and embedding cost per trace.

The sample traces (`data/samples/traces`) are repeated `--copies` times into one OpenAI-style
JSONL file, each copy made distinct, and each phase runs over the whole file:

- **parse**: `json.loads` of every line (the baseline: nothing cheaper reads a trace);
- **read**: the format readers into conversations (`data.traces.formats`);
- **scrub**: reading plus scrubbing into trace records (`data.traces.ingest.scrubbed_trace`);
- **ingest**: the whole `foundry ingest traces` step (read, scrub, embed the request, write the
  lake shard and statuses), in a fresh temporary lake.

Each phase prints traces per second and its ratio to **parse**. Run from the repository root:
`.venv/bin/python bench/trace_ingest.py [--copies 40]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.config import TracesConfig  # noqa: E402
from data.lake import Lake  # noqa: E402
from data.llm import embed  # noqa: E402
from data.scrub import Scrubber  # noqa: E402
from data.traces import (  # noqa: E402
    Conversation,  # noqa: E402
    ingest_traces,
    read_file,  # noqa: E402
    scrubbed_trace,
)

SAMPLE = ROOT / "data" / "samples" / "traces" / "support-chat.jsonl"


def corpus(folder: Path, copies: int) -> tuple[Path, int]:
    """The sample exchanges repeated `copies` times, each copy's requests made distinct."""
    lines = [line for line in SAMPLE.read_text().splitlines() if line.strip()]
    good = []
    for line in lines:
        try:
            json.loads(line)
            good.append(line)
        except ValueError:
            continue
    path = folder / "traces.jsonl"
    with path.open("w") as out:
        for copy in range(copies):
            for line in good:
                out.write(line.replace("?", f" (case {copy})?", 1) + "\n")
    return path, copies * len(good)


def timed(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=40)
    args = parser.parse_args()
    embed(["warm up the embedding model"])  # loading it is not per-trace work
    with tempfile.TemporaryDirectory() as tmp:
        path, n = corpus(Path(tmp), args.copies)
        scrubber = Scrubber()

        def parse() -> None:
            for line in path.read_text().splitlines():
                json.loads(line)

        def read() -> None:
            list(read_file(path))

        def scrub() -> None:
            for item in read_file(path):
                if isinstance(item, Conversation):
                    scrubbed_trace(item, scrubber)

        def ingest() -> None:
            lake = Lake(Path(tmp) / "home")
            ingest_traces([str(path)], lake, TracesConfig(), "bench", lambda message: None)

        phases = {
            name: timed(fn)
            for name, fn in [("parse", parse), ("read", read), ("scrub", scrub), ("ingest", ingest)]
        }
    base = n / phases["parse"]
    print(f"{n} traces ({args.copies} copies of the OpenAI-style sample)")
    print(f"{'phase':<8} {'seconds':>8} {'traces/s':>10} {'vs parse':>9}")
    for name, seconds in phases.items():
        rate = n / seconds
        print(f"{name:<8} {seconds:>8.2f} {rate:>10.0f} {rate / base:>9.3f}")


if __name__ == "__main__":
    main()
