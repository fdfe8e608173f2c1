"""`foundry run --plan`: what a run will ask of its models and what that costs, before any call.

A run's work is counted in units: the items of each source type's first stage (a document
chunk, a trace, a world, a commit: `sources.base.Source.unit_stage`), estimated from the
sources about to be ingested (`Source.estimate`, within the type's cap) plus those the lake
already holds and no run has worked on. Each LLM stage's calls are then units times that
stage's calls per unit, and each call's tokens its stage's tokens per call, priced at the
current prices of the roles that stage calls (`data.prices`).

Calls per unit and tokens per call are the lake's measured averages over the earlier runs that
recorded their calls' stages; the range the run may fall in spans the lowest and highest
run's calls per unit, widened by `MEASURED_MARGIN` either way, times the units' own
uncertainty (`UNIT_MARGIN`). A lake without such a run uses `default_rates` (a doc-QA run's
shape worked out from the configuration) with a range of a factor `DEFAULT_MARGIN` either
way. Work a crashed run left pending past the first stages
(candidates not yet verified, tasks not yet calibrated) is added at its stage's measured
calls per item. Nothing here calls a model or writes to the lake.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from data.config import FoundryConfig
from data.embedded import EMBEDDED_MODEL_ALIAS
from data.endpoints import role_prices
from data.lake import Lake

MEASURED_MARGIN = 1.33  # the measured range widened by this factor either way
UNIT_MARGIN = 1.5  # the units estimated from file sizes: off by up to this factor either way
DEFAULT_MARGIN = 4.0  # without a measured run: this factor either way
DEFAULT_PROMPT_TOKENS = 800
DEFAULT_COMPLETION_TOKENS = 80


@dataclass(frozen=True)
class Rate:
    """One stage's calls to one role: per unit of work (with its range) and tokens per call."""

    calls_per_unit: float
    low: float
    high: float
    prompt_tokens: float
    completion_tokens: float


@dataclass
class StagePlan:
    stage: str
    role: str
    calls: float
    low_calls: float
    high_calls: float
    tokens: float
    cost_usd: float
    low_cost_usd: float
    high_cost_usd: float


@dataclass
class RunPlan:
    """A run's estimate: units of work by source type, calls, tokens and cost per stage and
    role with their ranges, and what the rates rest on (`basis`)."""

    units: dict[str, int]
    stages: list[StagePlan]
    basis: str
    notes: list[str] = field(default_factory=list)

    @property
    def totals(self) -> dict[str, float]:
        keys = (
            "calls",
            "low_calls",
            "high_calls",
            "tokens",
            "cost_usd",
            "low_cost_usd",
            "high_cost_usd",
        )
        return {k: sum(getattr(s, k) for s in self.stages) for k in keys}

    def to_json(self) -> dict[str, Any]:
        return {
            "units": self.units,
            "basis": self.basis,
            "notes": self.notes,
            "stages": [vars(s) for s in self.stages],
            "totals": self.totals,
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


def default_rates(config: FoundryConfig) -> dict[tuple[str, str], Rate]:
    """Rates for a lake with no measured run: a document chunk's way through the stages as the
    configuration shapes it: three in four candidates verified, half as many repair variants
    again, each calibrated task attempted k times (adaptive: 0.6 of `reference_k`), an attempt
    half way between one call and one a turn up to `max_turns` (environments with tools)."""
    candidates = config.generate.candidates_per_chunk
    judges = len(config.roles.judges)
    calibration = config.calibrate
    attempts = calibration.k if calibration.method == "fixed" else calibration.reference_k * 0.6
    turns = (1 + calibration.max_turns) / 2  # one call an attempt, or a turn's each (tools)
    tasks = candidates * 0.75 * 1.5  # verified, with their repair variants
    per_unit = {
        ("generate", "generator"): candidates + 1.0,
        ("calibrate", "solver"): tasks * attempts * turns,
        ("repair", "generator"): tasks / 3,
    }
    for judge in range(judges):
        per_unit[("verify", f"judge:{judge}")] = candidates * 1.5 * 2.0
        per_unit[("review", f"judge:{judge}")] = tasks
    return {
        key: Rate(
            calls_per_unit=calls,
            low=calls / DEFAULT_MARGIN,
            high=calls * DEFAULT_MARGIN,
            prompt_tokens=DEFAULT_PROMPT_TOKENS,
            completion_tokens=(
                config.calibrate.max_tokens if key[0] == "calibrate" else DEFAULT_COMPLETION_TOKENS
            ),
        )
        for key, calls in per_unit.items()
    }


def plan_run(
    lake: Lake, config: FoundryConfig, units: dict[str, int], unit_stages: list[str]
) -> RunPlan:
    """The estimate for a run over `units` (by source type) on `lake` under `config`."""
    rates, runs = measured_rates(lake, unit_stages)
    basis = (
        f"measured over {runs} earlier run(s)"
        if runs
        else (
            f"defaults: no earlier run recorded its calls' stages (a factor {DEFAULT_MARGIN:g}"
            " either way)"
        )
    )
    if not rates:
        rates = default_rates(config)
    prices = role_prices(config, EMBEDDED_MODEL_ALIAS)
    total_units = sum(units.values())
    stages = []
    for (stage, role), rate in sorted(rates.items()):
        price_in, price_out = prices.get(role, (0.0, 0.0))
        per_call = (rate.prompt_tokens * price_in + rate.completion_tokens * price_out) / 1e6
        calls = rate.calls_per_unit * total_units
        stages.append(
            StagePlan(
                stage=stage,
                role=role,
                calls=calls,
                low_calls=rate.low * total_units / UNIT_MARGIN,
                high_calls=rate.high * total_units * UNIT_MARGIN,
                tokens=calls * (rate.prompt_tokens + rate.completion_tokens),
                cost_usd=calls * per_call,
                low_cost_usd=rate.low * total_units / UNIT_MARGIN * per_call,
                high_cost_usd=rate.high * total_units * UNIT_MARGIN * per_call,
            )
        )
    return RunPlan(units=units, stages=stages, basis=basis)


def format_plan(plan: RunPlan) -> str:
    """The plan as text: units, a row per stage and role, the totals with their ranges."""
    units = ", ".join(f"{n} {kind}" for kind, n in plan.units.items()) or "none"
    lines = [f"plan: {units} (units of work); rates {plan.basis}"]
    lines.append(
        f"  {'stage':<14} {'role':<10} {'calls':>8} {'range':>15} {'tokens':>10}"
        f" {'cost USD':>10} {'range':>19}"
    )
    for s in [*plan.stages, _total_row(plan)]:
        calls, cost = _span(s.low_calls, s.high_calls, 0), _span(s.low_cost_usd, s.high_cost_usd, 4)
        lines.append(
            f"  {s.stage:<14} {s.role:<10} {s.calls:>8.0f} {calls:>15}"
            f" {s.tokens:>10.0f} {s.cost_usd:>10.4f} {cost:>19}"
        )
    lines += [f"  {note}" for note in plan.notes]
    return "\n".join(lines)


def _total_row(plan: RunPlan) -> StagePlan:
    t = plan.totals
    return StagePlan(
        "total",
        "",
        t["calls"],
        t["low_calls"],
        t["high_calls"],
        t["tokens"],
        t["cost_usd"],
        t["low_cost_usd"],
        t["high_cost_usd"],
    )


def _span(low: float, high: float, digits: int) -> str:
    return f"{low:.{digits}f}-{high:.{digits}f}"
