"""`foundry run --plan` without a measured run: each LLM stage's calls, worked out from the
configuration and the run's work (units by source type, repositories).

There is one shape per stage of the pipeline's registry (`flows.stages.llm_stages`), by name;
the plan asks for every registered stage, and says in its notes which one has no shape here
(tests/test_plan.py fails on such a stage). The shapes are rough on purpose, and the plan
says so with its range (`data.plan.estimate.DEFAULT_MARGIN` either way):

- a candidate is verified `VERIFIED` of the time, and a verified task gets `VARIANTS - 1`
  repair variants; a third of the tasks move on the repair ladder (one generator call each);
- verify asks each judge `JUDGE_CHECKS[class]` questions per candidate (code is checked by
  its tests, not by judges); review asks each judge once per calibrated task;
- calibrate makes `k` attempts per task (adaptive: 0.6 of `reference_k`), each one call, or
  half way between one call and `max_turns` where the environment has tools (documents,
  worlds), each up to its family's attempt length;
- the judges' control items are asked once per judge (`CONTROL_KINDS` per item) when there
  are documents; intents name a cluster per `TRACES_PER_INTENT` traces; a world is built per
  `TRACES_PER_WORLD` traces (a draft and its rewrites); a planted world task takes
  `WORLD_DRAFTS` drafts; a document report asks for each passage's facts and the request;
- the stages that redo what people rejected (`revise`) plan nothing: no rejection is known
  ahead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from data.config import FoundryConfig

VERIFIED = 0.75
VARIANTS = 1.5
REPAIRED = 1 / 3
JUDGE_CHECKS = {"doc": 2.0, "report": 2.0, "code": 0.0, "trace": 1.0, "world": 1.0}
CONTROL_KINDS = 3
TRACES_PER_INTENT = 5
TRACES_PER_WORLD = 15
WORLD_DRAFTS = 2
WORLD_SPEC_TOKENS = 1024  # a world drafted from traces: its spec, as JSON
PROMPT_TOKENS = 800
COMPLETION_TOKENS = 80


@dataclass(frozen=True)
class Work:
    """What a run will work on: units by source type (`docs` chunks, `repos` commits,
    `traces`, `worlds`) and the repositories it makes code tasks of at their HEAD."""

    units: Mapping[str, int]
    repositories: int = 0

    def __getitem__(self, source: str) -> int:
        return self.units.get(source, 0)


@dataclass(frozen=True)
class Calls:
    """A stage's calls to one role, and the tokens of one call."""

    calls: float
    prompt_tokens: float = PROMPT_TOKENS
    completion_tokens: float = COMPLETION_TOKENS


def made(config: FoundryConfig, work: Work) -> dict[str, float]:
    """Candidates made from the run's work, by class of task (before verification)."""
    code = config.code
    trace_worlds = math.ceil(work["traces"] / TRACES_PER_WORLD)
    sequences = work["repos"] / code.sequence_steps if code.sequence_steps >= 2 else 0.0
    return {
        "doc": work["docs"] * config.generate.candidates_per_chunk,
        "report": float(min(config.reports.max_reports, work["docs"])),
        "code": work["repos"]
        + sequences
        + work.repositories * (code.max_functions + code.max_bugs),
        "trace": float(work["traces"]),
        "world": (work["worlds"] + trace_worlds) * config.worlds.tasks_per_world,
    }


def tasks(config: FoundryConfig, work: Work) -> dict[str, float]:
    """Verified tasks by class, repair variants included: what calibrate attempts."""
    return {kind: n * VERIFIED * VARIANTS for kind, n in made(config, work).items()}


def attempts(config: FoundryConfig) -> float:
    """Attempts per task calibrated."""
    calibration = config.calibrate
    return calibration.k if calibration.method == "fixed" else calibration.reference_k * 0.6


def _attempt(config: FoundryConfig, kind: str) -> tuple[float, float]:
    """One attempt's calls and the most tokens a call of it answers with, by class."""
    limits = {
        "doc": ((1 + config.calibrate.max_turns) / 2, config.calibrate.max_tokens),
        "report": (1.0, config.reports.attempt_max_tokens),
        "code": (1.0, config.code.attempt_max_tokens),
        "trace": (1.0, config.traces.attempt_max_tokens),
        "world": ((1 + config.worlds.max_turns) / 2, config.worlds.attempt_max_tokens),
    }
    return limits[kind]


Shape = Callable[[FoundryConfig, Work], dict[str, Calls]]


def _controls(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    return {"judge": Calls(CONTROL_KINDS * config.verify.control_items if work["docs"] else 0)}


def _generate(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    return {"generator": Calls(work["docs"] * (config.generate.candidates_per_chunk + 1))}


def _describe(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    statement = config.code.statement_max_tokens
    return {"generator": Calls(work["repos"], completion_tokens=statement)}


def _sequence(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    steps = config.code.sequence_steps
    return {"generator": Calls(work["repos"] / steps if steps >= 2 else 0.0)}


def _intents(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    return {"generator": Calls(math.ceil(work["traces"] / TRACES_PER_INTENT))}


def _trace_tasks(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    return {"judge": Calls(work["traces"]), "generator": Calls(work["traces"])}


def _trace_worlds(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    worlds = math.ceil(work["traces"] / TRACES_PER_WORLD)
    drafts = worlds * (1 + config.worlds.refine_rounds)
    return {"generator": Calls(drafts, completion_tokens=WORLD_SPEC_TOKENS)}


def _world_tasks(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    return {"generator": Calls(made(config, work)["world"] * WORLD_DRAFTS)}


def _reports(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    return {"generator": Calls(made(config, work)["report"] * (config.reports.passages + 1))}


def _verify(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    checks = sum(n * VARIANTS * JUDGE_CHECKS[kind] for kind, n in made(config, work).items())
    return {"judge": Calls(checks)}


def _calibrate(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    calls = tokens = 0.0
    for kind, n in tasks(config, work).items():
        per_attempt, completion = _attempt(config, kind)
        kind_calls = n * attempts(config) * per_attempt
        calls += kind_calls
        tokens += kind_calls * completion
    return {"solver": Calls(calls, completion_tokens=tokens / calls if calls else 0.0)}


def _review(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    return {"judge": Calls(sum(tasks(config, work).values()))}


def _repair(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    return {"generator": Calls(sum(tasks(config, work).values()) * REPAIRED)}


def _nothing(config: FoundryConfig, work: Work) -> dict[str, Calls]:
    return {}


SHAPES: dict[str, Shape] = {
    "controls": _controls,
    "generate": _generate,
    "describe": _describe,
    "sequence": _sequence,
    "intents": _intents,
    "trace_tasks": _trace_tasks,
    "trace_worlds": _trace_worlds,
    "world_tasks": _world_tasks,
    "reports": _reports,
    "verify": _verify,
    "calibrate": _calibrate,
    "review": _review,
    "repair": _repair,
    "revise": _nothing,
}


def default_calls(config: FoundryConfig, work: Work, stage: str) -> dict[str, Calls] | None:
    """Stage `stage`'s calls by role (`judge:N` for each judge) for `work`; None where it has
    no shape here."""
    shape = SHAPES.get(stage)
    if shape is None:
        return None
    judges = [f"judge:{i}" for i in range(len(config.roles.judges))]
    out: dict[str, Calls] = {}
    for role, calls in shape(config, work).items():
        for name in judges if role == "judge" else [role]:
            if calls.calls > 0:
                out[name] = calls
    return out
