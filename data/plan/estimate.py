"""`foundry run --plan`: what a run will ask of its models, what that costs and the sandbox
time its code tasks take, before any call.

A run's work is counted in units: the items of each source type's first stage (a document
chunk, a trace, a world, a commit: `sources.base.Source.unit_stage`), estimated from the
sources about to be ingested (`Source.estimate`, within the type's cap) plus those the lake
already holds and no run has worked on; and the repositories it makes code tasks of. Every
LLM stage of the pipeline's registry (`flows.stages.llm_stages`) is planned: its calls are
units times that stage's calls per unit, and each call's tokens its stage's tokens per call,
priced at the prices of the roles that stage calls (`data.costs.prices`; a role whose model has no
price makes the cost unknown, and the totals a lower bound).

Calls per unit and tokens per call are the lake's measured averages over the earlier runs that
recorded their calls' stages; the range the run may fall in spans the lowest and highest
run's calls per unit, widened by `MEASURED_MARGIN` either way, times the units' own
uncertainty (`UNIT_MARGIN`). A stage no such run called, and every stage of a lake without
one, is worked out from the configuration (`data.plan.defaults`) with a range of a factor
`DEFAULT_MARGIN` either way; the notes name those stages. Sandbox time: `data.plan.sandbox`.
Nothing here calls a model or writes to the lake.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from data.config import FoundryConfig
from data.costs import Cost, Price
from data.lake import Lake
from data.llm import EMBEDDED_MODEL_ALIAS, role_configs, role_prices
from data.plan.defaults import Work, default_calls
from data.plan.price_check import unpriced_warning
from data.plan.sandbox import SandboxPlan, plan_sandbox, unknown_stages

MEASURED_MARGIN = 1.33  # the measured range widened by this factor either way
UNIT_MARGIN = 1.5  # the units estimated from file sizes: off by up to this factor either way
DEFAULT_MARGIN = 4.0  # without a measured run: this factor either way


@dataclass(frozen=True)
class Rate:
    """One stage's calls to one role: per unit of work (with its range) and tokens per call."""

    calls_per_unit: float
    low: float
    high: float
    prompt_tokens: float
    completion_tokens: float


@dataclass(frozen=True)
class Estimate:
    """One stage's calls to one role in this run, their range, and the tokens of a call."""

    calls: float
    low: float
    high: float
    prompt_tokens: float
    completion_tokens: float


@dataclass
class StagePlan:
    """One stage's calls to one role, with their range, tokens and cost (`data.costs.cost`), and
    whether its rates were `measured` or are the `default`."""

    stage: str
    role: str
    calls: float
    low_calls: float
    high_calls: float
    tokens: float
    cost: Cost
    low_cost: Cost
    high_cost: Cost
    basis: str = "measured"

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "role": self.role,
            "basis": self.basis,
            "calls": self.calls,
            "low_calls": self.low_calls,
            "high_calls": self.high_calls,
            "tokens": self.tokens,
            **self.cost.to_json(),
            **self.low_cost.to_json("low_cost_usd", "low_unpriced_models"),
            **self.high_cost.to_json("high_cost_usd", "high_unpriced_models"),
        }


@dataclass
class RunPlan:
    """A run's estimate: units of work by source type, calls, tokens and cost per stage and
    role with their ranges, what the rates rest on (`basis`), and its sandbox time."""

    units: dict[str, int]
    stages: list[StagePlan]
    basis: str
    sandbox: SandboxPlan
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> StagePlan:
        """The sum over the stages."""
        total = StagePlan("total", "", 0.0, 0.0, 0.0, 0.0, Cost(), Cost(), Cost(), "")
        for s in self.stages:
            total.calls += s.calls
            total.low_calls += s.low_calls
            total.high_calls += s.high_calls
            total.tokens += s.tokens
            total.cost += s.cost
            total.low_cost += s.low_cost
            total.high_cost += s.high_cost
        return total

    @property
    def totals(self) -> dict[str, Any]:
        figures = self.total.to_json()
        return {k: v for k, v in figures.items() if k not in ("stage", "role", "basis")}

    def to_json(self) -> dict[str, Any]:
        return {
            "units": self.units,
            "basis": self.basis,
            "notes": self.notes,
            "stages": [s.to_json() for s in self.stages],
            "totals": self.totals,
            "sandbox": self.sandbox.to_json(),
        }


def measured_rates(lake: Lake, unit_stages: list[str]) -> tuple[dict[tuple[str, str], Rate], int]:
    """Calls per unit and tokens per call by (stage, role), over the runs that recorded their
    calls' stages and worked on at least one unit; and how many runs that is."""
    if not lake.shards("llm_calls"):
        return {}, 0
    units = {
        r["run_id"]: r["n"]
        for r in lake.rows(
            "SELECT run_id, count(*) AS n FROM status WHERE list_contains(?, stage)"
            " AND run_id <> '' GROUP BY run_id",
            [unit_stages],
        )
    }
    calls = lake.rows(
        "SELECT run_id, stage, role, count(*) AS calls, avg(prompt_tokens) AS prompt,"
        " avg(completion_tokens) AS completion FROM llm_calls"
        " WHERE stage <> '' AND NOT cached GROUP BY ALL"
    )
    seen: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in calls:
        if units.get(row["run_id"]):
            seen[(row["stage"], row["role"])].append(row)
    runs = {r["run_id"] for r in calls if units.get(r["run_id"])}
    total_units = sum(units[r] for r in runs)
    rates = {}
    for key, rows in seen.items():
        n_calls = sum(r["calls"] for r in rows)
        per_unit = [r["calls"] / units[r["run_id"]] for r in rows]
        per_unit += [0.0] * (len(runs) - len(rows))  # runs that made no such call
        rates[key] = Rate(
            calls_per_unit=n_calls / total_units,
            low=min(per_unit) / MEASURED_MARGIN,
            high=max(per_unit) * MEASURED_MARGIN,
            prompt_tokens=sum(r["prompt"] * r["calls"] for r in rows) / n_calls,
            completion_tokens=sum(r["completion"] * r["calls"] for r in rows) / n_calls,
        )
    return rates, len(runs)


def plan_run(
    lake: Lake,
    config: FoundryConfig,
    work: Work,
    unit_stages: list[str],
    stages: Sequence[str],
    sandbox_stages: Sequence[str],
) -> RunPlan:
    """The estimate for a run over `work` on `lake` under `config`, for the LLM `stages` and
    `sandbox_stages` of the pipeline's registry, in the order they run."""
    rates, runs = measured_rates(lake, unit_stages)
    units = sum(work.units.values())
    estimates = {
        key: Estimate(
            rate.calls_per_unit * units,
            rate.low * units / UNIT_MARGIN,
            rate.high * units * UNIT_MARGIN,
            rate.prompt_tokens,
            rate.completion_tokens,
        )
        for key, rate in rates.items()
        if key[0] in stages
    }
    measured = {stage for stage, _ in estimates}
    defaulted, unshaped = [], []
    margin = DEFAULT_MARGIN * UNIT_MARGIN
    for stage in stages:
        if stage in measured:
            continue
        shaped = default_calls(config, work, stage)
        if shaped is None:
            unshaped.append(stage)
            continue
        for role, c in shaped.items():
            estimates[(stage, role)] = Estimate(
                c.calls, c.calls / margin, c.calls * margin, c.prompt_tokens, c.completion_tokens
            )
        defaulted += [stage] if shaped else []
    order = {stage: i for i, stage in enumerate(stages)}
    prices = role_prices(config, EMBEDDED_MODEL_ALIAS)
    models = _role_models(config)
    planned = [
        _row(stage, role, e, prices.get(role), models.get(role, role), stage in measured)
        for (stage, role), e in sorted(estimates.items(), key=lambda kv: (order[kv[0][0]], kv[0]))
    ]
    recorded = [json.loads(r["summary"] or "{}").get("sandbox", {}) for r in lake.runs()]
    plan = RunPlan(
        units=dict(work.units),
        stages=planned,
        basis=_basis(runs),
        sandbox=plan_sandbox(config, work, sandbox_stages, recorded),
    )
    if runs and defaulted:
        plan.notes.append(
            f"no earlier run called {', '.join(defaulted)}: their calls are the defaults"
            f" (a factor {DEFAULT_MARGIN:g} either way)"
        )
    if unshaped:
        plan.notes.append(f"not estimated (no default for the stage): {', '.join(unshaped)}")
    unknown = unknown_stages(config, sandbox_stages)
    if unknown:
        plan.notes.append(f"sandbox time not estimated for: {', '.join(unknown)}")
    unpriced = {s.role: models.get(s.role, s.role) for s in planned if not s.cost.known}
    if unpriced:
        plan.notes.append(unpriced_warning(unpriced))
    return plan


def _basis(runs: int) -> str:
    if runs:
        return f"measured over {runs} earlier run(s)"
    return (
        f"defaults: no earlier run recorded its calls' stages (a factor {DEFAULT_MARGIN:g}"
        " either way)"
    )


def _role_models(config: FoundryConfig) -> dict[str, str]:
    """Each role's model as configured: its name, the embedded one's alias, or (left to its
    server) the server's URL."""
    return {
        role: cfg.model or (EMBEDDED_MODEL_ALIAS if cfg.base_url is None else cfg.base_url)
        for role, cfg in role_configs(config).items()
    }


def _row(
    stage: str, role: str, e: Estimate, price: Price | None, model: str, measured: bool
) -> StagePlan:
    """One stage and role's row of the plan, priced at `price` (None: unknown)."""

    def cost(calls: float) -> Cost:
        if price is None:
            return Cost.of(0.0, [model])
        return Cost(calls * price.cost(e.prompt_tokens, e.completion_tokens))

    return StagePlan(
        stage=stage,
        role=role,
        calls=e.calls,
        low_calls=e.low,
        high_calls=e.high,
        tokens=e.calls * (e.prompt_tokens + e.completion_tokens),
        cost=cost(e.calls),
        low_cost=cost(e.low),
        high_cost=cost(e.high),
        basis="measured" if measured else "default",
    )


def format_plan(plan: RunPlan) -> str:
    """The plan as text: units, a row per stage and role, the totals with their ranges, the
    sandbox time, the notes."""
    units = ", ".join(f"{n} {kind}" for kind, n in plan.units.items()) or "none"
    lines = [f"plan: {units} (units of work); rates {plan.basis}"]
    lines.append(
        f"  {'stage':<14} {'role':<10} {'calls':>8} {'range':>15} {'tokens':>10}"
        f" {'cost USD':>10} {'range':>19}"
    )
    for s in [*plan.stages, plan.total]:
        calls = f"{s.low_calls:.0f}-{s.high_calls:.0f}"
        cost, span = _usd(s.cost), _span(s.low_cost, s.high_cost)
        lines.append(
            f"  {s.stage:<14} {s.role:<10} {s.calls:>8.0f} {calls:>15}"
            f" {s.tokens:>10.0f} {cost:>10} {span:>19}"
        )
    total = plan.total.cost
    lines.append(f"  cost: {total.text()}")
    sandbox = plan.sandbox
    if sandbox.test_runs:
        per_stage = ", ".join(f"{stage} {n:.0f}" for stage, n in sandbox.test_runs.items())
        lines.append(
            f"  sandbox: {sum(sandbox.test_runs.values()):.0f} test runs ({per_stage}),"
            f" about {sandbox.seconds:,.0f} s of test time; {sandbox.basis}"
        )
    lines += [f"  {note}" for note in plan.notes]
    return "\n".join(lines)


def _usd(cost: Cost) -> str:
    """A cost in a table cell: the amount, ">=" the amount where it is a lower bound, or
    "unknown" where nothing of it is priced."""
    if cost.known:
        return f"{cost.priced_usd:.4f}"
    return f">={cost.priced_usd:.4f}" if cost.priced_usd else "unknown"


def _span(low: Cost, high: Cost) -> str:
    """A cost's range in a table cell, marked ">=" where it is a lower bound."""
    if not high.priced_usd:
        return _usd(high)
    figures = f"{low.priced_usd:.4f}-{high.priced_usd:.4f}"
    return figures if high.known else f">={figures}"
