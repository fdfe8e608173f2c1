"""What admitting a code candidate costs: a repository's function-rebuild and bug-fix
candidates made with no model, then each put through the admission gates
(`UnitTests.self_check`: fresh runs, the outside check, the empty and do-nothing attempts,
mutants, the red team), timed one by one.

Usage: python bench/admission_cost.py REPO [--functions N] [--bugs N] [--home DIR]

REPO is a git repository (a held-out one: the figures in docs/benchmarks.md use more-itertools
10.5.0's sources made a one-commit repository). It prints, per candidate, the seconds its
admission took and where it ended, then the mean per candidate. It imports only what the
admission has had since 0b32d8f, so the same file times an older checkout
(`PYTHONPATH=<checkout> python bench/admission_cost.py ...` from that checkout).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from data.config import FoundryConfig
from data.lake import Lake
from data.repos import ingest_repo
from families.bug_injection import inject_bugs
from families.function_rebuild import rebuild_functions
from families.stage import StageContext
from generators.mutations import mutants_of_change


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--functions", type=int, default=3, help="function rebuilds (3)")
    parser.add_argument("--bugs", type=int, default=3, help="bug-fix candidates (3)")
    parser.add_argument("--home", type=Path, help="lake folder (default: a temporary one)")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="admission-cost-"))
    code = {"max_functions": args.functions, "max_bugs": args.bugs}
    config = FoundryConfig(home=home, code=code)
    ctx = StageContext(lake=Lake(home), config=config, run_id="admission-cost")
    ingest_repo(str(args.repo), ctx.lake, ctx.config.home, ctx.run_id)
    started = time.perf_counter()
    rebuild_functions(ctx)
    inject_bugs(ctx)
    made = time.perf_counter() - started
    tasks = sorted(ctx.lake.records("tasks"), key=lambda task: task.task_id)
    print(f"{len(tasks)} candidates made in {made:.0f} s")
    spent, admitted = [], 0
    for task in tasks:
        started = time.perf_counter()
        admission = asyncio.run(ctx.unit_tests.self_check(task, mutants_of_change))
        spent.append(time.perf_counter() - started)
        outcome = str(admission.failure) if admission.failure else "admitted"
        admitted += admission.failure is None
        print(f"{spent[-1]:7.1f} s  {task.kind:<16} {task.task_id}  {outcome[:100]}")
    if spent:
        mean = sum(spent) / len(spent)
        print(
            f"admission: {mean:.1f} s per candidate ({len(spent)} candidates, {admitted} admitted)"
        )


if __name__ == "__main__":
    main()
