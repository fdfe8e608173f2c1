"""The `loop` flow: rounds of export, train, evaluate, re-measure and steer, each round's policy
the next one's start.

A round starts from policy P (round 1: `policy`, default the embedded model):
1. the pipeline's LLM stages over what is pending (among it what the last round steered and
   the traces it ingested), then P measured on every verified task (`calibrate:<P>`);
2. export: the round's version of the loop's taskset (`<export name>-<loop>`), its bands as
   P measured them;
3. train: P trained on the version's in-band `train` tasks, by the `train` flow here or by the
   `train` deployment on its own work pool (`trainer="deployment"`); with `trainer="given"`
   the new policy is the round's entry of `given` (trained and served elsewhere);
4. evaluate P and the new policy Q on the version's `eval` split (`foundry evaluate`);
5. Q measured on every verified task, and each `train` task of the version steered by what Q
   did with it (`flows.steering`: toward Q's band, or a new task targeting Q's failure, named
   in its lineage); the `eval` split is never steered;
6. Q's recorded rollouts of step 5 on `train` tasks ingested as traces;
7. the round recorded (`loop_rounds`: `foundry stats`, the report page).
A re-run resumes: finished rounds are skipped, and within a round every step skips what the
lake already holds (a trained policy is kept once its model folder is complete).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import flow
from prefect.deployments import run_deployment

from data.config import load_config
from data.lake import Lake, LoopRound, ProxyCall, content_id, loop_rows, utcnow
from data.llm import EMBEDDED, Policy, parse_policy
from families.stage import StageContext
from flows.evaluate import as_solver, evaluate_flow
from flows.pipeline import export_task, run_llm_stages, stage_context
from flows.stages import (
    llm_stages,
    recalibration,
    steering,
    steering_stage_name,
)
from flows.train import train_flow
from judges.evaluation import split_task_ids
from sources.traces import ingest_trace_files

Trainer = Literal["grpo", "deployment", "given"]
DEFAULT_ROUNDS = 2
DEFAULT_ATTEMPTS = 4
TRAIN_DEPLOYMENT = "train/train"
TRAINED = "trained.json"  # written beside a round's model once training finished


@dataclass(frozen=True)
class LoopSettings:
    """A loop's parameters beside its rounds and first policy (see `loop_flow`)."""

    name: str
    trainer: Trainer
    given: list[str]
    attempts: int
    steps: int | None
    learning_rate: float | None
    completion_tokens: int | None
    train_deployment: str
    home: str | None
    config: str | None


@flow(name="loop")
def loop_flow(
    rounds: int = DEFAULT_ROUNDS,
    policy: str = EMBEDDED,
    trainer: Trainer = "grpo",
    given: list[str] | None = None,
    name: str = "loop",
    attempts: int = DEFAULT_ATTEMPTS,
    steps: int | None = None,
    learning_rate: float | None = None,
    completion_tokens: int | None = None,
    train_deployment: str = TRAIN_DEPLOYMENT,
    home: str | None = None,
    config: str | None = None,
) -> dict[str, Any]:
    """Run `rounds` rounds of the loop named `name` from `policy` (see the module docstring).

    Args:
        rounds: how many rounds to have run (finished ones are kept, not run again)
        policy: the policy round 1 starts from: `embedded`, a model folder, or for
            `trainer="given"` also `MODEL@URL`
        trainer: `grpo` (the train flow in this process), `deployment` (the train deployment,
            on its own work pool), `given` (no training: round r's policy is `given[r-1]`)
        given: with `trainer="given"`, the policy each round makes, one per round
        name: the loop's name; its taskset is `<export name>-<name>`, a version per round
        attempts: attempts per eval task
        steps: training steps per round (default: the train flow's)
        learning_rate: the training's (default: the train flow's)
        completion_tokens: the training's longest completion (default: the train flow's)
        train_deployment: the deployment `trainer="deployment"` runs
        home: the foundry home
        config: a foundry.toml to use
    """
    given = list(given or [])
    if rounds < 1 or attempts < 1:
        raise ValueError("rounds and attempts must be at least 1")
    if trainer == "given" and len(given) < rounds:
        raise ValueError(f"trainer 'given' needs a policy per round: {rounds} rounds, {len(given)}")
    current = parse_policy(policy)
    if trainer != "given" and current.folder is None and current.spec != EMBEDDED:
        raise ValueError(f"{policy} is served, not trainable: start from `embedded` or a folder")
    settings = LoopSettings(
        name,
        trainer,
        given,
        attempts,
        steps,
        learning_rate,
        completion_tokens,
        train_deployment,
        home,
        config,
    )
    done = _finished_rounds(home, config, name)
    for round_ in range(1, rounds + 1):
        if round_ not in done:
            done[round_] = _round(round_, current, settings).model_dump(mode="json")
        current = parse_policy(done[round_]["trained_spec"])
    kept = _finished_rounds(home, config, name)  # as the lake holds them, as a re-run shows
    return {"loop": name, "rounds": [kept[r] for r in range(1, rounds + 1)], "policy": current.spec}


def _finished_rounds(home: str | None, config: str | None, name: str) -> dict[int, dict]:
    """The rounds of loop `name` the lake holds, by number."""
    cfg = load_config(Path(config) if config else None, Path(home) if home else None)
    return {row["round"]: row for row in loop_rows(Lake(cfg.home), name)}


def _round(round_: int, start: Policy, settings: LoopSettings) -> LoopRound:
    """One round from policy `start`; returns its record (also written to the lake)."""
    name, config = settings.name, settings.config
    with stage_context("loop", settings.home, config) as ctx:
        folder = ctx.config.home / "loop" / name / f"round-{round_}"
        ctx.progress(f"loop {name}, round {round_}: stages, then {start.label} measured")
        run_llm_stages([s.name for s in llm_stages()], ctx)
        with as_solver(ctx, start):
            run_llm_stages([recalibration(start.label)], ctx)
        taskset = ctx.config.export.name + f"-{name}"
        export = ctx.config.export.model_copy(update={"name": taskset})
        ctx.config = ctx.config.model_copy(update={"export": export})
        about = {"loop": name, "round": round_, "policy": start.label}
        version = export_task(ctx, None, None, start.label, name_by_solver=False, loop=about).path
        home_path = str(ctx.config.home)
    train_ids = split_task_ids(version, "train")
    eval_ids = split_task_ids(version, "eval")
    if settings.trainer == "given":
        trained = parse_policy(settings.given[round_ - 1])
    else:
        trained = _trained(start, version, folder, settings, home_path)
    evaluation = _evaluated(version, start, trained, eval_ids, settings.attempts, home_path, config)
    with stage_context("loop-measure", home_path, config) as ctx:
        steer_name = steering_stage_name(round_, trained.label)
        with as_solver(ctx, trained):
            stages = [recalibration(trained.label), steering(steer_name, train_ids)]
            run_llm_stages(stages, ctx)
        episodes = _ingest_episodes(ctx, trained, train_ids, folder)
        record = LoopRound(
            round_id=content_id(name, round_),
            loop=name,
            round=round_,
            taskset=f"{version.parent.name}/{version.name}",
            tasks=len(train_ids) + len(eval_ids),
            train_tasks=len(train_ids),
            eval_tasks=len(eval_ids),
            policy=start.label,
            trained=trained.label,
            trained_spec=trained.spec,
            k=settings.attempts,
            **evaluation,
            steered=_outcomes(ctx.lake, steer_name),
            targets=_targets(ctx.lake, round_, trained.label),
            episodes=episodes,
            recorded_at=utcnow(),
        )
        ctx.lake.write("loop_rounds", [record], ctx.run_id)
    return record


def _trained(
    start: Policy, version: Path, folder: Path, settings: LoopSettings, home: str
) -> Policy:
    """`start` trained on the version's in-band `train` tasks into `folder/train/model` (kept
    once done: `folder/trained.json` says so)."""
    out = folder / "train"
    model = out / "model"
    marker = folder / TRAINED
    if not (marker.is_file() and (model / "config.json").is_file()):
        parameters = {
            "taskset": str(version),
            "model": str(start.folder) if start.folder else EMBEDDED,
            "steps": settings.steps,
            "out": str(out),
            "home": home,
            "config": settings.config,
            "learning_rate": settings.learning_rate,
            "completion_tokens": settings.completion_tokens,
            "in_band_only": True,
        }
        if settings.trainer == "deployment":
            deployment = settings.train_deployment
            run = run_deployment(deployment, parameters=parameters, timeout=None)
            if run.state is None or not run.state.is_completed():
                state = run.state.name if run.state else "unknown"
                raise RuntimeError(f"the {deployment} run {run.id} ended {state}")
            summary: dict[str, Any] = {"deployment": deployment, "flow_run": str(run.id)}
        else:
            summary = train_flow(**parameters)
        if not (model / "config.json").is_file():
            raise RuntimeError(f"training saved no model in {model}")
        text = json.dumps(summary, indent=2, default=str) + "\n"
        _written_atomically(marker, lambda tmp: tmp.write_text(text))
    return parse_policy(str(model))


def _written_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """`write` the file at a temporary name beside `path`, then rename it into place: a kill
    leaves the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    os.replace(tmp, path)


def _evaluated(
    version: Path,
    start: Policy,
    trained: Policy,
    eval_ids: list[str],
    attempts: int,
    home: str,
    config: str | None,
) -> dict[str, Any]:
    """The round's `before`/`after` fields: `start` and `trained` on the version's eval split
    (`foundry evaluate`), and the per-task difference."""
    if not eval_ids:
        none: dict[str, Any] = {"before": None, "after": None, "difference": None}
        return {**none, "before_ci": [], "after_ci": [], "difference_ci": []}
    policies = [start.spec] if trained.label == start.label else [start.spec, trained.spec]
    result = evaluate_flow(
        taskset=str(version),
        policies=policies,
        split="eval",
        attempts=attempts,
        home=home,
        config=config,
    )
    before, after = result["evaluations"][0], result["evaluations"][-1]
    difference = (result["differences"] or [None])[0]
    return {
        "before": before["pass_rate"],
        "after": after["pass_rate"],
        "before_ci": [before["ci_low"], before["ci_high"]],
        "after_ci": [after["ci_low"], after["ci_high"]],
        "difference": difference["mean"] if difference else None,
        "difference_ci": [difference["low"], difference["high"]] if difference else [],
    }


def _ingest_episodes(ctx: StageContext, trained: Policy, train_ids: list[str], folder: Path) -> int:
    """The recording proxy's records of `trained`'s rollouts on the `train` tasks (its
    re-measurement), written to `folder/episodes.parquet` and ingested as traces; returns the
    rollouts. Rollouts on eval tasks are left out: a trace task made of one would carry an eval
    question to the train side."""
    columns = ", ".join(f"p.{name}" for name in ProxyCall.model_fields)
    rows = ctx.lake.rows(
        f"SELECT DISTINCT {columns} FROM proxy_calls p JOIN attempts a USING (rollout_id)"
        " WHERE a.stage = ? AND list_contains(?, a.task_id) AND p.rollout_id <> ''"
        " ORDER BY p.call_id",
        [recalibration(trained.label).name, train_ids],
    )
    if not rows:
        return 0
    path = folder / "episodes.parquet"
    table = pa.Table.from_pylist(rows, schema=ProxyCall.arrow_schema())
    _written_atomically(path, lambda tmp: pq.write_table(table, tmp))
    ingest_trace_files([str(path)], ctx)
    return len({row["rollout_id"] for row in rows})


def _outcomes(lake: Lake, stage: str) -> dict[str, int]:
    """The latest status of each item of `stage`, counted as `status:reason`."""
    rows = lake.rows(
        "SELECT status || ':' || reason AS outcome, count(*) AS n FROM status WHERE stage = ?"
        " GROUP BY 1 ORDER BY 1",
        [stage],
    )
    return {row["outcome"]: row["n"] for row in rows}


def _targets(lake: Lake, round_: int, policy: str) -> dict[str, int]:
    """Tasks made to target `policy`'s failures in round `round_`, by failure kind."""
    rows = lake.rows(
        "SELECT json_extract_string(lineage, '$.target.failure') AS failure, count(*) AS n"
        " FROM tasks WHERE TRY_CAST(json_extract(lineage, '$.target.round') AS INTEGER) = ?"
        " AND json_extract_string(lineage, '$.target.policy') = ? GROUP BY 1 ORDER BY 1",
        [round_, policy],
    )
    return {row["failure"]: row["n"] for row in rows}
