"""Solver calls per calibrated task: adaptive with per-task priors vs the pooled rule vs fixed k.

Works on the lake of a finished run with at least 50 verified, calibrated tasks across families
(`bench/calibration_calls.toml` makes one on the embedded default in about 40 minutes). Every
task is planned the way the pipeline plans it (`judges.calibration.Planner`), with the lake's
other tasks as the earlier history (leave one out: a task's own outcomes never inform its
prior), and calibrated by the pipeline's own `calibrate`, four ways:

    task     adaptive, each task's prior from the earlier tasks like it (the default)
    pooled   adaptive, one prior per environment (the rule before per-task priors)
    fixed8   8 attempts          fixed16   16 attempts

1. Known truths (`--replications`, default 200): a fake solver whose pass rate on each task is
   drawn, afresh in every replication, from the lake's real distribution: the task's posterior
   under the population prior fitted to every calibration in the lake (what its own recorded
   attempts say, with what the whole lake says). Each replication draws 32 pass/fail outcomes
   per task, which every method reads in order (common random numbers). An attempt costs as
   many solver calls as it did on average in the run, in the task's environment. Accuracy: the
   band is right for the true pass rate, or the true rate lies within the indifference zone of
   a band edge, where either neighbour counts as right.
2. The embedded solver (`--embedded N`, default 0; `--kind` to choose kinds): up to N tasks
   per kind attempted for real in their environments, per-task priors vs fixed 16; calls
   from the client's records, bands compared with each other (there is no truth).

    .venv/bin/python bench/calibration_calls.py [--home .foundry-calibration]
        [--config bench/calibration_calls.toml] [--replications 200] [--embedded 2 [--kind K]]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.config import CalibrateConfig, FoundryConfig, load_config  # noqa: E402
from data.lake import (  # noqa: E402
    MEASURED_BY,
    Lake,
    Task,
    Usage,
    seed_for,
)
from data.llm import (  # noqa: E402
    LLMClient,
    Reply,
    ResponseCache,
    resolve_endpoints,
)
from families import family_of  # noqa: E402
from families.stage import StageContext  # noqa: E402
from judges import calibration  # noqa: E402
from judges.adaptive import GRID, LABELS, BandRule, Prior  # noqa: E402
from judges.score import Score  # noqa: E402
from judges.task_prior import Earlier, Features  # noqa: E402
from tests.fakes.scripted_llm import fake_endpoints  # noqa: E402

METHODS = ("task", "pooled", "fixed8", "fixed16")
MAX_ATTEMPTS = 32


@dataclass(frozen=True)
class Calibrated:
    """A verified task of the lake, where the run attempted it and what it found."""

    task: Task
    environment: str
    attempts: int
    passes: int

    @property
    def earlier(self) -> Earlier:
        return Earlier(Features.of(self.task, self.environment), self.attempts, self.passes)


def calibrated_tasks(lake: Lake, solver: str) -> list[Calibrated]:
    rows = lake.rows(
        "SELECT d.task_id, d.harness, d.n, d.passes FROM difficulty d JOIN status s"
        f" ON s.item_id = d.task_id AND s.stage = 'calibrate' AND {MEASURED_BY}"
        " WHERE d.solver_model = ? AND d.n > 0 ORDER BY d.task_id",
        [solver],
    )
    tasks = {
        t.task_id: t
        for t in lake.records("tasks", "list_contains(?, task_id)", [[r["task_id"] for r in rows]])
    }
    return [Calibrated(tasks[r["task_id"]], r["harness"], r["n"], r["passes"]) for r in rows]


def calls_per_attempt(lake: Lake) -> dict[str, float]:
    """Solver calls per calibration attempt in each environment, as the run spent them."""
    rows = lake.rows(
        "WITH per_rollout AS (SELECT rollout_id, count(*) AS n FROM proxy_calls GROUP BY 1)"
        " SELECT a.harness, count(*) AS attempts, sum(coalesce(r.n, 0)) AS calls"
        " FROM attempts a LEFT JOIN per_rollout r USING (rollout_id)"
        " WHERE a.stage = 'calibrate' GROUP BY 1"
    )
    return {r["harness"]: max(1.0, float(r["calls"]) / r["attempts"]) for r in rows}


def settings(config: CalibrateConfig, method: str) -> CalibrateConfig:
    if method.startswith("fixed"):
        return config.model_copy(update={"method": "fixed", "k": int(method[5:])})
    return config.model_copy(update={"method": "adaptive", "prior": method})


def plans(config: CalibrateConfig, tasks: list[Calibrated]) -> dict[str, list[calibration.Plan]]:
    """Each method's plan for each task, its history the other tasks."""
    earlier = [t.earlier for t in tasks]
    made: dict[str, list[calibration.Plan]] = defaultdict(list)
    for i, item in enumerate(tasks):
        others = earlier[:i] + earlier[i + 1 :]
        for method in METHODS:
            planner = calibration.Planner(settings(config, method), others)
            made[method].append(planner.plan_for(item.task, item.environment))
    return made


class KnownOutcomes:
    """The fake solver: attempt i at a task passes when `outcomes[task][i]` says so."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.outcomes: dict[str, np.ndarray] = {}

    async def attempt(
        self,
        task: Task,
        llm: LLMClient,
        rollout_ids: list[str],
        *,
        temperature: float,
        max_tokens: int,
        seed: int,
    ) -> list[Reply]:
        first = seed - seed_of(task)
        row = self.outcomes[task.task_id][first : first + len(rollout_ids)]
        return [Reply("pass" if ok else "fail", Usage(), False) for ok in row]


def seed_of(task: Task) -> int:
    return seed_for("calibrate", task.task_id)[1]


async def grade_known(task: Task, completion: str) -> Score:
    return Score(1.0 if completion == "pass" else 0.0, completion)


def known_truths(
    config: CalibrateConfig,
    tasks: list[Calibrated],
    made: dict[str, list[calibration.Plan]],
    per_attempt: dict[str, float],
    replications: int,
) -> None:
    started = time.perf_counter()
    rule = BandRule(config.band_low, config.band_high, config.indifference)
    right = rule.acceptable()
    population = Prior.fit([(t.attempts, t.passes) for t in tasks])
    truth_weights = []
    for t in tasks:
        w = population.weights * GRID**t.passes * (1 - GRID) ** (t.attempts - t.passes)
        truth_weights.append(w / w.sum())
    harnesses = {t.environment: KnownOutcomes(t.environment) for t in tasks}
    client = LLMClient(fake_endpoints("http://127.0.0.1:9", model="known-rates"), cache=None)
    calls: dict[str, list[float]] = {m: [] for m in METHODS}
    correct: dict[str, list[float]] = {m: [] for m in METHODS}
    by_env: dict[tuple[str, str], list[float]] = defaultdict(list)
    right_by_env: dict[tuple[str, str], list[float]] = defaultdict(list)

    async def replicate(rng: np.random.Generator) -> None:
        for i, item in enumerate(tasks):
            truth = rng.choice(len(GRID), p=truth_weights[i])
            harness = harnesses[item.environment]
            harness.outcomes[item.task.task_id] = rng.random(MAX_ATTEMPTS) < GRID[truth]
            for method in METHODS:
                how = made[method][i]
                attempts, difficulty = await calibration.calibrate(
                    item.task, client, settings(config, method), how, harness, grade_known
                )
                spent = len(attempts) * per_attempt.get(item.environment, 1.0)
                calls[method].append(spent)
                correct[method].append(right[LABELS.index(difficulty.band), truth])
                by_env[(item.environment, method)].append(spent)
                right_by_env[(item.environment, method)].append(correct[method][-1])

    for r in range(replications):
        asyncio.run(replicate(np.random.default_rng(1000 + r)))
    asyncio.run(client.aclose())
    took = time.perf_counter() - started

    print(f"\n1. known truths: {len(tasks)} tasks x {replications} replications ({took:.0f} s)")
    print(f"{'method':<10}{'calls/task':>11}{'vs fixed16':>12}{'accuracy':>10}{'vs fixed16':>12}")
    base_calls, base_right = np.mean(calls["fixed16"]), np.mean(correct["fixed16"])
    for method in METHODS:
        mean_calls, accuracy = np.mean(calls[method]), np.mean(correct[method])
        diff = np.array(correct[method]) - np.array(correct["fixed16"])
        error = diff.std(ddof=1) / np.sqrt(len(diff))
        print(
            f"{method:<10}{mean_calls:>11.2f}{mean_calls / base_calls:>12.3f}"
            f"{accuracy:>10.4f}{accuracy - base_right:>+12.4f} (se {error:.4f})"
        )
    print(f"calls per task and accuracy by environment ({', '.join(METHODS)}):")
    per_env = Counter(t.environment for t in tasks)
    for env in sorted(per_env):
        row = "".join(
            f"{np.mean(by_env[(env, m)]):>8.2f} {np.mean(right_by_env[(env, m)]):.3f}"
            for m in METHODS
        )
        print(f"{env:<18}{per_env[env]:>4}{row}")
    used = Counter(p.prior.split(":")[0] for p in made["task"])
    alike = np.array([p.prior_alike or 0.0 for p in made["task"]])
    print(
        f"priors used (task method): {dict(used)}; earlier tasks counted alike: median"
        f" {np.median(alike):.1f}, min {alike.min():.1f}, max {alike.max():.1f}"
    )


async def embedded_once(
    ctx: StageContext, item: Calibrated, how: calibration.Plan, method: str, endpoints, cache
) -> tuple[int, int, str]:
    """(attempts, solver calls, band) of one real calibration of `item`."""
    family = family_of(item.task.kind)
    if item.environment not in ctx.harnesses:
        ctx.harnesses[item.environment] = family.harness(item.environment, ctx)
    config = settings(family.attempt_config(ctx.config), method)
    client = LLMClient(endpoints, cache, run_id=f"bench-{method}")
    try:
        attempts, difficulty = await calibration.calibrate(
            item.task, client, config, how, ctx.harnesses[item.environment], family.grader(ctx)
        )
    finally:
        await client.aclose()
    calls = sum(call.role == "solver" for call in client.drain_calls())
    return len(attempts), calls, difficulty.band


def embedded(
    config: FoundryConfig,
    lake: Lake,
    tasks: list[Calibrated],
    made: dict[str, list[calibration.Plan]],
    per_family: int,
    kinds: list[str] | None,
) -> None:
    started = time.perf_counter()
    chosen: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(tasks):
        name = item.task.kind
        if (not kinds or name in kinds) and len(chosen[name]) < per_family:
            chosen[name].append(i)
    ctx = StageContext(lake, config, run_id="bench-calibration-calls")
    totals: dict[str, list[int]] = {m: [0, 0] for m in ("task", "fixed16")}
    agree = 0
    print(f"\n2. embedded solver: up to {per_family} tasks per kind ({', '.join(chosen)})")
    print(
        f"{'kind':<18}{'environment':<18}{'task: att calls band':>26}"
        f"{'fixed16: att calls band':>30}"
    )
    with (
        tempfile.TemporaryDirectory() as scratch,
        resolve_endpoints(config, Path(scratch) / "logs") as endpoints,
    ):
        for indices in chosen.values():
            for i in indices:
                item, row = tasks[i], {}
                for method in totals:
                    cache = ResponseCache(Path(scratch) / method)
                    row[method] = asyncio.run(
                        embedded_once(ctx, item, made[method][i], method, endpoints, cache)
                    )
                    totals[method][0] += row[method][0]
                    totals[method][1] += row[method][1]
                agree += row["task"][2] == row["fixed16"][2]
                a, f = row["task"], row["fixed16"]
                print(
                    f"{item.task.kind:<18}{item.environment:<18}{a[0]:>8}{a[1]:>6} {a[2]:>11}"
                    f"{f[0]:>12}{f[1]:>6} {f[2]:>11}"
                )
    n = sum(len(v) for v in chosen.values())
    ratio = totals["task"][1] / totals["fixed16"][1] if totals["fixed16"][1] else float("nan")
    print(
        f"{n} tasks: calls per task {totals['task'][1] / n:.2f} (task priors) vs"
        f" {totals['fixed16'][1] / n:.2f} (fixed 16), ratio {ratio:.3f}; same band {agree} of {n}"
        f" ({time.perf_counter() - started:.0f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=ROOT / ".foundry-calibration")
    parser.add_argument("--config", type=Path, default=ROOT / "bench" / "calibration_calls.toml")
    parser.add_argument("--replications", type=int, default=200)
    parser.add_argument("--embedded", type=int, default=0, help="tasks per kind (0: none)")
    parser.add_argument(
        "--kind", action="append", help="the embedded part: only these kinds (repeat)"
    )
    parser.add_argument("--min-tasks", type=int, default=50)
    args = parser.parse_args()

    config = load_config(args.config, args.home).model_copy(update={"home": args.home})
    lake = Lake(args.home)
    solver = lake.rows(
        "SELECT solver_model AS m FROM difficulty WHERE stage = 'calibrate'"
        " GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
    )[0]["m"]
    tasks = calibrated_tasks(lake, solver)
    if len(tasks) < args.min_tasks:
        sys.exit(
            f"{args.home} holds {len(tasks)} calibrated tasks of {solver}; need {args.min_tasks}"
        )
    kinds = Counter(t.task.kind for t in tasks)
    print(f"{len(tasks)} calibrated tasks of solver {solver}: {dict(sorted(kinds.items()))}")
    rates = np.array([t.passes / t.attempts for t in tasks])
    print(
        f"their recorded pass rates: mean {rates.mean():.3f}; {np.mean(rates == 0):.0%} none"
        f" passed, {np.mean(rates == 1):.0%} all passed"
    )
    per_attempt = calls_per_attempt(lake)
    print("solver calls per attempt: " + ", ".join(f"{k} {v:.2f}" for k, v in per_attempt.items()))
    started = time.perf_counter()
    made = plans(config.calibrate, tasks)
    print(f"planned every task four ways in {time.perf_counter() - started:.0f} s")
    if args.replications:
        known_truths(config.calibrate, tasks, made, per_attempt, args.replications)
    if args.embedded:
        embedded(config, lake, tasks, made, args.embedded, args.kind)


if __name__ == "__main__":
    main()
