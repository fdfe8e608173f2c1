"""Solver calls per task, by family and environment: adaptive calibration vs a fixed k.

Takes the verified tasks of a finished run (`make run` leaves one in `.foundry`), up to
`--per-family` per family, and calibrates each twice in its family's environment, as the
pipeline does: the adaptive rule (Jeffreys prior, rounds of `round_size`) and a fixed k. A
multi-turn attempt (search, tools) costs a call per turn, so calls per task are counted from
the client's own records, not from attempts. Each method gets an empty response cache of its
own: nothing one method asked is answered for the other from the cache.

    .venv/bin/python bench/calibration_calls.py [--home .foundry] [--config data/samples/demo.toml]
        [--per-family 3] [--k 8] [--kind doc_qa --kind ...]

It prints, per family and environment: tasks, mean attempts and solver calls per task for each
method, the adaptive/fixed call ratio, the bands each method gave and how often they agree.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.config import FoundryConfig, load_config  # noqa: E402
from data.endpoints import Endpoint  # noqa: E402
from data.lake import Lake  # noqa: E402
from data.llm import LLMClient  # noqa: E402
from data.llm_cache import ResponseCache  # noqa: E402
from data.model_servers import resolve_endpoints  # noqa: E402
from data.records import Task  # noqa: E402
from families import REGISTERED  # noqa: E402
from families.base import Family  # noqa: E402
from families.stage import StageContext  # noqa: E402
from judges import calibration  # noqa: E402

METHODS = ("adaptive", "fixed")


@dataclass
class Tally:
    """One family and environment under one method."""

    tasks: int = 0
    attempts: int = 0
    calls: int = 0
    seconds: float = 0.0
    bands: Counter[str] = field(default_factory=Counter)


def verified_tasks(lake: Lake, family: Family, limit: int) -> list[Task]:
    ids = [
        r["task_id"]
        for r in lake.rows(
            "SELECT t.task_id FROM tasks t JOIN status s ON s.item_id = t.task_id"
            " AND s.stage = 'verify' AND s.status = 'done'"
            " WHERE list_contains(?, t.kind) ORDER BY t.task_id",
            [list(family.kinds)],
        )
    ][:limit]
    return lake.records("tasks", "list_contains(?, task_id)", [ids]) if ids else []


async def calibrate_once(
    ctx: StageContext,
    family: Family,
    task: Task,
    method: str,
    k: int,
    endpoints: dict[str, Endpoint],
    cache: ResponseCache,
) -> tuple[str, int, int, float, str]:
    """(environment, attempts, solver calls, seconds, band) of one calibration of `task`."""
    name = family.environment(task, ctx.config, endpoints["solver"])
    if name not in ctx.harnesses:
        ctx.harnesses[name] = family.harness(name, ctx)
    settings = family.attempt_config(ctx.config).model_copy(update={"method": method, "k": k})
    client = LLMClient(endpoints, cache, run_id=f"bench-{method}")
    start = time.perf_counter()
    try:
        attempts, difficulty = await calibration.calibrate(
            task,
            client,
            settings,
            calibration.plan(settings, []),
            ctx.harnesses[name],
            family.grader(ctx),
        )
    finally:
        await client.aclose()
    calls = sum(call.role == "solver" for call in client.drain_calls())
    return name, len(attempts), calls, time.perf_counter() - start, difficulty.band


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=ROOT / ".foundry")
    parser.add_argument("--config", type=Path, default=ROOT / "data" / "samples" / "demo.toml")
    parser.add_argument("--per-family", type=int, default=3)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--kind", action="append", help="only these kinds' families (repeat)")
    args = parser.parse_args()

    config: FoundryConfig = load_config(args.config, args.home).model_copy(
        update={"home": args.home}
    )
    lake = Lake(args.home)
    ctx = StageContext(lake, config, run_id="bench-calibration-calls")
    tallies: dict[tuple[str, str, str], Tally] = {}
    agree: Counter[tuple[str, str]] = Counter()
    with (
        tempfile.TemporaryDirectory() as scratch,
        resolve_endpoints(config, Path(scratch) / "logs") as endpoints,
    ):
        caches = {m: ResponseCache(Path(scratch) / m) for m in METHODS}
        chosen = [f for f in REGISTERED if not args.kind or set(f.kinds) & set(args.kind)]
        for family in chosen:
            for task in verified_tasks(lake, family, args.per_family):
                bands = {}
                for method in METHODS:
                    name, attempts, calls, seconds, band = asyncio.run(
                        calibrate_once(ctx, family, task, method, args.k, endpoints, caches[method])
                    )
                    tally = tallies.setdefault((task.kind, name, method), Tally())
                    tally.tasks += 1
                    tally.attempts += attempts
                    tally.calls += calls
                    tally.seconds += seconds
                    tally.bands[band] += 1
                    bands[method] = band
                agree[(task.kind, name)] += bands["adaptive"] == bands["fixed"]
        model = endpoints["solver"].model
    print(f"solver calls per task, adaptive vs fixed k={args.k} (solver: {model})")
    header = f"{'kind':<18}{'environment':<18}{'tasks':>6}  {'adaptive: att calls s':>24}"
    print(header + f"  {'fixed: att calls s':>21}  {'calls ratio':>11}  bands agree")
    for kind, name in sorted({(k, n) for k, n, _ in tallies}):
        a, f = tallies[(kind, name, "adaptive")], tallies[(kind, name, "fixed")]
        ratio = (a.calls / f.calls) if f.calls else float("nan")
        print(
            f"{kind:<18}{name:<18}{a.tasks:>6}  "
            f"{a.attempts / a.tasks:>8.1f} {a.calls / a.tasks:>6.1f} {a.seconds / a.tasks:>7.1f}  "
            f"{f.attempts / f.tasks:>5.1f} {f.calls / f.tasks:>6.1f} {f.seconds / f.tasks:>7.1f}  "
            f"{ratio:>11.2f}  {agree[(kind, name)]}/{a.tasks}"
        )
        print(f"{'':<36}adaptive bands {dict(a.bands)}; fixed bands {dict(f.bands)}")


if __name__ == "__main__":
    main()
