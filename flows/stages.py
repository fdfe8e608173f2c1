"""The pipeline's LLM stages, as plain functions over the lake (no Prefect here, so tests need
no server): the registered families' generation stages (each family declares its own,
`Family.stages`), then the judges' control items, verify, calibrate, review and repair
(`flows.review_stages`), which ask each task's family what it needs; and the stages named
after a solver or policy (re-calibration, evaluation, a loop's steering).

Each stage finds the items not finished yet; `flows.stage_runs` processes them in batches and
writes every batch as shards: outputs first, then the items' status, then LLM usage. An item is
finished once its latest status is `done` or `rejected`; `failed` items (errors that may be
transient) are taken again by the next run. Outputs have content-hash keys, so an item
processed twice after a crash still appears once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import families
import sources
from data.config import ConfigError, FoundryConfig, extension_settings
from data.lake import (
    MEASURED_BY,
    Attempt,
    Record,
    Task,
    content_id,
)
from data.llm import Endpoint, LLMClient
from families import family_of, generation_stages, sandbox_stages
from families import kinds as registered_kinds
from families.base import Checked
from families.stage import (
    EVALUATE,
    LLMStage,
    Outcome,
    SandboxStage,
    StageContext,
    kinds_in_scope,
    load_tasks,
    pending_items,
    unfinished,
)
from flows.repair import Stop
from flows.review_stages import (
    REPAIRED,
    ToRepair,
    family_inputs,
    first_variant,
    load_repair_material,
    load_tasks_with_attempts,
    pending_repair,
    pending_review,
    repair_one,
    review_one,
)
from flows.revision import REVISION_STAGE
from flows.steering import first_failure, steer
from generators.checks import CheckFailure
from harnesses.base import Harness
from judges import calibration, controls
from judges.task_prior import MOST_HISTORY, Earlier, Features


def check_kinds(kinds: Sequence[str] | None) -> None:
    """Refuse (`ConfigError`, one line) a scope naming a kind no registered family makes."""
    known = registered_kinds()
    unknown = [kind for kind in kinds or () if kind not in known]
    if unknown:
        raise ConfigError(
            f"scope.kinds: no task family makes {unknown[0]!r} (known kinds: {', '.join(known)})"
        )


def check_extensions(config: FoundryConfig) -> None:
    """Refuse (`ConfigError`, one line) an `[extensions.<name>]` table that no registered family
    (by its first kind) or source declares settings for, or whose settings it refuses."""
    declared = {f.extension: f.settings for f in families.REGISTERED if f.settings is not None}
    declared |= {s.name: s.settings for s in sources.REGISTERED if s.settings is not None}
    for name in config.extensions:
        if name not in declared:
            raise ConfigError(
                f"extensions.{name}: no registered family or source has settings by that name"
                f" (those that do: {', '.join(sorted(declared)) or 'none'})"
            )
        extension_settings(config, name, declared[name])


# controls: before verify, each judge on control items made from the run's chunks

CONTROL_CHUNKS = 200  # the chunks control items are drawn from, at most


def pending_controls(ctx: StageContext) -> list[str]:
    """One item for the judge panel as configured (its models and the number of items), until
    measured; none without chunks or with `verify.control_items = 0`."""
    verify = ctx.config.verify
    if verify.control_items == 0 or not ctx.lake.rows("SELECT 1 FROM chunks LIMIT 1"):
        return []
    panel = [(j.base_url, j.model, j.temperature, j.seed) for j in ctx.config.roles.judges]
    item = content_id("controls", panel, verify.control_items, controls.CHECK.version)
    return unfinished(ctx, "controls", [item])


def load_control_material(ctx: StageContext, items: list[str]) -> dict[str, list[str]]:
    rows = ctx.lake.rows(f"SELECT text FROM chunks ORDER BY chunk_id LIMIT {CONTROL_CHUNKS}")
    return {item: [row["text"] for row in rows] for item in items}


async def measure_controls(
    ctx: StageContext, item: str, chunks: list[str], client: LLMClient
) -> Outcome:
    """Each judge's accuracy on control items; a judge below the threshold is reported."""
    verify = ctx.config.verify
    made = controls.controls_from(chunks, verify.control_items, seed=item)
    if not made:
        return Outcome(ctx.status("controls", item, "done", "no_control_items"))
    records = await controls.measure(made, client, verify.control_accuracy)
    for record in records:
        ctx.progress(controls.figure(record) if record.competent else controls.warning(record))
    if not any(record.competent for record in records):
        ctx.progress(
            "no judge passed its controls, so none decides alone: every check a judge would"
            " decide (answerability, instructions, trace outcomes, rubric and equivalence"
            " grading, reviews) is held (held_judge_below_controls) until a judge that passes"
            " its controls decides; a fill-in-the-blank of a sentence its source quotes"
            " verbatim meets only the leak gate"
        )
    reason = "judges_competent" if all(r.competent for r in records) else "judge_below_accuracy"
    detail = ", ".join(f"{r.role} {r.correct}/{r.items}" for r in records)
    status = ctx.status("controls", item, "done", reason, detail)
    return Outcome(status, {"judge_controls": list(records)})


# verify: candidate -> accepted / rejected by the judge panel


def pending_verify(ctx: StageContext) -> list[str]:
    sql = f"SELECT task_id AS id FROM tasks WHERE {kinds_in_scope(ctx)} ORDER BY task_id"
    return pending_items(ctx, "verify", sql)


@dataclass(frozen=True)
class ToVerify:
    """A task and what its family's `verify` checks it against (what the family's
    `load_for_verify` loaded: a document task's passage, nothing for a code task)."""

    task: Task
    loaded: object


def load_tasks_to_verify(ctx: StageContext, task_ids: list[str]) -> dict[str, ToVerify]:
    """The tasks, each with what its family loaded for its `verify`; the stage reads nothing
    else (a task its family loaded nothing for is left out: `input_missing`)."""
    tasks = load_tasks(ctx, task_ids)
    loaded = family_inputs(tasks, lambda family, own: family.load_for_verify(ctx, own))
    return {i: ToVerify(task, loaded[i]) for i, task in tasks.items() if i in loaded}


async def verify_one(
    ctx: StageContext, task_id: str, loaded: ToVerify, client: LLMClient
) -> Outcome:
    """The task's family checks it (its verifier's self-check, the judges it needs)."""
    task = loaded.task
    checked: Checked = await family_of(task.kind).verify(task, loaded.loaded, client, ctx)
    records: dict[str, list[Record]] = {}
    if checked.verdicts or checked.consensus or checked.gates:
        records = {
            "verdicts": list(checked.verdicts),
            "consensus": list(checked.consensus),
            "gates": list(checked.gates),
        }
    status = ctx.status("verify", task_id, checked.state, checked.reason, checked.detail)
    return Outcome(status, records)


# calibrate: accepted task -> attempts and difficulty


VERIFIED = "SELECT item_id AS id FROM status WHERE stage = 'verify' AND status = 'done' ORDER BY id"


def pending_calibrate(ctx: StageContext) -> list[str]:
    sql = (
        "SELECT s.item_id AS id FROM status s JOIN tasks t ON t.task_id = s.item_id"
        f" WHERE s.stage = 'verify' AND s.status = 'done' AND {kinds_in_scope(ctx, 't.kind')}"
        " ORDER BY id"
    )
    return pending_items(ctx, "calibrate", sql)


def calibration_planner(ctx: StageContext, solver: str) -> calibration.Planner:
    """The run's calibration planner for `solver`, from the tasks calibrated against it by
    earlier runs (not this one's, so every batch, in any process, plans alike whichever
    finishes first), the most recent last."""
    if solver not in ctx.plans:
        rows = ctx.lake.rows(
            "SELECT d.task_id, d.harness, d.n, d.passes FROM difficulty d JOIN status s"
            f" ON s.item_id = d.task_id AND s.stage LIKE 'calibrate%' AND {MEASURED_BY}"
            " WHERE d.solver_model = ? AND s.run_id <> ? AND d.n > 0"
            " ORDER BY s.recorded_at, d.task_id",
            [solver, ctx.run_id],
        )[-MOST_HISTORY:]
        tasks = load_tasks(ctx, [r["task_id"] for r in rows])
        history = [
            Earlier(Features.of(tasks[r["task_id"]], r["harness"]), r["n"], r["passes"])
            for r in rows
            if r["task_id"] in tasks
        ]
        ctx.plans[solver] = calibration.Planner(ctx.config.calibrate, history)
    return ctx.plans[solver]


def calibration_harness(ctx: StageContext, task: Task, solver: Endpoint) -> Harness:
    """The harness of the environment `task`'s family puts it in for `solver`, built once per
    process."""
    family = family_of(task.kind)
    name = family.environment(task, ctx.config, solver)
    if name not in ctx.harnesses:
        ctx.harnesses[name] = family.harness(name, ctx)
    return ctx.harnesses[name]


def calibrate_into(stage: str, fixed_k: int | None = None) -> Callable[..., Awaitable[Outcome]]:
    """The calibrate work for `stage`: attempts in the task's environment, scored by its
    family's grader, and the difficulty row they measure, which names `stage`. The run's plan
    decides how many attempts and the status names the band; with `fixed_k` (an evaluation)
    there are exactly that many and the status says `evaluated`. Attempts without a verdict are
    recorded beside them, and named in the status's detail; a calibration given up for want of
    verdicts is `failed`, `no_verdict`, its attempts recorded, and taken again by a later run."""

    async def calibrate_one(
        ctx: StageContext, task_id: str, task: Task, client: LLMClient
    ) -> Outcome:
        family = family_of(task.kind)
        harness = calibration_harness(ctx, task, client.endpoint("solver"))
        config = family.attempt_config(ctx.config)
        if fixed_k is None:
            planner = calibration_planner(ctx, client.model("solver"))
            plan = planner.plan_for(task, harness.name)
        else:
            config = config.model_copy(update={"method": "fixed", "k": fixed_k})
            plan = calibration.plan(config, [])
        try:
            attempts, difficulty = await calibration.calibrate(
                task, client, config, plan, harness, family.grader(ctx), stage
            )
        except calibration.Unjudged as stopped:
            status = ctx.status(stage, task_id, "failed", stopped.reason, stopped.detail)
            return Outcome(status, {"attempts": list(stopped.attempts)})
        detail = f"{difficulty.passes} of {difficulty.n} passed in {harness.name}"
        unjudged = len(attempts) - difficulty.n
        if unjudged:
            detail += f"; {unjudged} more without a verdict"
        reason = difficulty.band if fixed_k is None else "evaluated"
        return Outcome(
            ctx.status(stage, task_id, "done", reason, detail),
            {"attempts": list(attempts), "difficulty": [difficulty]},
        )

    return calibrate_one


def recalibration(solver: str) -> LLMStage:
    """Calibration of every verified task against another solver (`foundry calibrate
    --solver`): its own stage, `calibrate:<solver>`, beside the pipeline's measurements."""
    name = f"calibrate:{solver}"
    return LLMStage(
        name, lambda ctx: pending_items(ctx, name, VERIFIED), load_tasks, calibrate_into(name)
    )


def evaluation_stage_name(policy: str, attempts: int) -> str:
    """The stage of evaluating `policy` (its label) with `attempts` per task."""
    return f"{EVALUATE}:k{attempts}:{policy}"


def evaluation(name: str, task_ids: Sequence[str] = ()) -> LLMStage:
    """Evaluation stage `name` (`evaluation_stage_name`): k attempts at each of `task_ids` in
    its environment, graded by its family, as calibration does with a fixed k; the difficulty
    rows and attempts name the stage. (A batch elsewhere rebuilds it from the name alone.)"""
    attempts = int(name.split(":")[1].removeprefix("k"))

    def pending(ctx: StageContext) -> list[str]:
        return unfinished(ctx, name, task_ids)

    return LLMStage(name, pending, load_tasks, calibrate_into(name, fixed_k=attempts))


def stage_named(name: str) -> LLMStage:
    """A pipeline stage, the re-calibration stage of `calibrate:<solver>`, an evaluation
    stage (`evaluate:k<K>:<policy>`) or a loop's steering stage (`steer:r<round>:<policy>`)."""
    for stage in llm_stages():
        if stage.name == name:
            return stage
    if name.startswith("calibrate:"):
        return recalibration(name.removeprefix("calibrate:"))
    if name.startswith(f"{EVALUATE}:"):
        return evaluation(name)
    if name.startswith(f"{STEER}:"):
        return steering(name)
    raise KeyError(f"no LLM stage {name!r}")


# steer (`foundry loop`): a train task -> a task toward the new policy's band or its failure

STEER = "steer"
TARGETED = "targeted"  # steer reason: a task made to target the policy's failure


def steering_stage_name(round_: int, policy: str) -> str:
    """The stage that steers by the failures of `policy` (its label), trained in `round_`."""
    return f"{STEER}:r{round_}:{policy}"


@dataclass(frozen=True)
class ToSteer:
    """A train task, its band for the policy, what its variants draw on, the policy's attempts
    at it, and its rubric items."""

    repair: ToRepair
    attempts: list[Attempt]
    rubric: list[str]


def steering(name: str, task_ids: Sequence[str] = ()) -> LLMStage:
    """Steering stage `name` (`steering_stage_name`) over `task_ids`, train tasks the policy
    was measured on (`calibrate:<policy>`): each gets a task toward the policy's band or
    targeting its first failed attempt (`flows.steering`). (A batch elsewhere rebuilds the
    stage from the name alone.)"""
    _, round_text, policy = name.split(":", 2)
    round_ = int(round_text.removeprefix("r"))
    measured_by = f"calibrate:{policy}"

    def pending(ctx: StageContext) -> list[str]:
        return unfinished(ctx, name, task_ids)

    def load(ctx: StageContext, ids: list[str]) -> dict[str, ToSteer]:
        attempts: dict[str, list[Attempt]] = {}
        for attempt in ctx.lake.records(
            "attempts", "stage = ? AND list_contains(?, task_id)", [measured_by, ids]
        ):
            attempts.setdefault(attempt.task_id, []).append(attempt)
        rubrics: dict[str, list[str]] = {}
        for row in ctx.lake.rows(
            "SELECT task_id, item FROM rubrics WHERE list_contains(?, task_id) ORDER BY rubric_id",
            [ids],
        ):
            rubrics.setdefault(row["task_id"], []).append(row["item"])
        material = load_repair_material(ctx, ids, measured_by)
        return {i: ToSteer(m, attempts.get(i, []), rubrics.get(i, [])) for i, m in material.items()}

    async def steer_one(
        ctx: StageContext, task_id: str, loaded: ToSteer, client: LLMClient
    ) -> Outcome:
        task, band = loaded.repair.task, loaded.repair.band
        family = family_of(task.kind)
        target = first_failure(loaded.attempts, round_, policy, loaded.rubric)
        plan = steer(band, target, task.lineage, family.ladder, ctx.config.repair.max_steps)
        if isinstance(plan, Stop):
            return Outcome(ctx.status(name, task_id, "done", plan.reason, plan.detail))
        material = loaded.repair.material
        failures: list[str] = []
        made: Task | None = None
        if plan.direction is not None:
            varied = await first_variant(
                family, task, plan.levels, plan.direction, material, client, ctx, failures
            )
            made = varied[1] if varied else None
        if made is None and plan.target is not None:
            try:
                made = await family.sibling(task, material, client, ctx)
            except CheckFailure as failure:
                failures.append(f"sibling: {failure.reason}")
        if made is None:
            what = plan.direction or "sibling"
            return Outcome(ctx.status(name, task_id, "done", f"no_{what}", "; ".join(failures)))
        if plan.target is not None:
            made = made.model_copy(
                update={"lineage": made.lineage.model_copy(update={"target": plan.target})}
            )
        reason, why = (REPAIRED, band) if plan.target is None else (TARGETED, plan.target.failure)
        detail = "; ".join([*failures, f"{why}: {made.task_id}"])
        return Outcome(ctx.status(name, task_id, "done", reason, detail), {"tasks": [made]})

    return LLMStage(name, pending, load, steer_one)


# first of all: a generation stage may ask the panel too (a trace's outcome, a world task's
# instruction), and a judge below its control bar must decide none of those either
CONTROLS = LLMStage(
    "controls", pending_controls, load_control_material, measure_controls, every_judge=True
)
CHECK_STAGES = (
    LLMStage(
        "verify",
        pending_verify,
        load_tasks_to_verify,
        verify_one,
        help="judge candidates (after the judges' control items): answerable with source, not"
        " without",
    ),
    LLMStage("calibrate", pending_calibrate, load_tasks, calibrate_into("calibrate")),
    LLMStage(
        "review",
        pending_review,
        load_tasks_with_attempts,
        review_one,
        help="rubrics from failed attempts; mine and remedy reward hacks",
    ),
    LLMStage(
        "repair",
        pending_repair,
        load_repair_material,
        repair_one,
        help="move out-of-band tasks one difficulty level toward the band",
    ),
    REVISION_STAGE,
)


def llm_stages() -> list[LLMStage]:
    """The pipeline's LLM stages in the order they run: the judges' control items, the
    registered families' generation stages (`families.generation_stages`), then verify,
    calibrate, review, repair and revise (replacing what reviewers rejected), which ask each
    task's family what it needs."""
    return [CONTROLS, *generation_stages(), *CHECK_STAGES]


def sandbox_named(name: str) -> SandboxStage:
    """A registered family's sandbox stage."""
    for stage in sandbox_stages():
        if stage.name == name:
            return stage
    raise KeyError(f"no sandbox stage {name!r}")


def command_stages() -> list[LLMStage | SandboxStage]:
    """The stages with a command and a flow of their own (`foundry <name>`, `_` as `-`): the
    sandbox stages, then the LLM stages that say what they do (`calibrate` has its own)."""
    return [*sandbox_stages(), *(stage for stage in llm_stages() if stage.help)]
