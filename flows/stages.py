"""Stage logic as plain functions over the lake (no Prefect here, so tests need no server).

The LLM stages run in order: the registered families' generation stages (each family declares
its own, `Family.stages`), then the judges' control items, verify, calibrate, review and
repair, here, which ask each task's family what it needs.

Each stage finds the items not finished yet, processes them in batches, and writes every batch
as shards: outputs first, then the items' status, then LLM usage. An item is finished once its
latest status is `done` or `rejected`; `failed` items (errors that may be transient) are taken
again by the next run. Outputs have content-hash keys, so an item processed twice after a crash
still appears once.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from data.config import ConfigError
from data.endpoints import Endpoint
from data.funnel import MEASURED_BY
from data.ingest import ingest_documents
from data.judge_controls import latest_controls
from data.llm import LLMClient
from data.records import (
    Attempt,
    Chunk,
    Direction,
    LLMCall,
    Record,
    Task,
    VerdictRerun,
    content_id,
)
from data.runtime import interrupt
from data.runtime.errors import ReasonedError
from data.runtime.interrupt import Interrupted
from families import family_of, generation_stages, reviewed_kinds
from families import kinds as registered_kinds
from families.base import Checked, Family
from families.stage import (
    LLMStage,
    Outcome,
    StageContext,
    batches,
    kind_in,
    kinds_in_scope,
    pending_items,
    unfinished,
)
from flows.repair import Stop, next_move
from flows.steering import first_failure, steer
from generators.checks import CheckFailure
from generators.doc_qa_variants import Material, Neighbour
from generators.knobs import Level
from harnesses.base import Harness
from harnesses.proxy import ACCESS_HEADER, is_loopback, running_proxy
from judges import answerability, calibration, controls
from judges.review import review
from judges.variance import reask

PROGRESS_EVERY_S = 15.0
STOP_POLL_S = 0.2  # how often a batch checks whether the process was asked to stop
REMEDIED = "hackable_remedied"  # review reason: a tighter verifier made a new task
REPAIRED = "repaired"  # repair reason: a variant one difficulty level away made a new task
DERIVED = (f"rejected:{REMEDIED}", f"done:{REPAIRED}")
REMEDY_ROUNDS = 2  # a remedied task can be remedied once more: the remedy ladder has two steps


def check_kinds(kinds: Sequence[str] | None) -> None:
    """Refuse (`ConfigError`, one line) a scope naming a kind no registered family makes."""
    known = registered_kinds()
    unknown = [kind for kind in kinds or () if kind not in known]
    if unknown:
        raise ConfigError(
            f"scope.kinds: no task family makes {unknown[0]!r} (known kinds: {', '.join(known)})"
        )


# --- ingest ------------------------------------------------------------------------------


def ingest_docs(paths: list[str], ctx: StageContext) -> Counter:
    """Read, normalise, chunk and deduplicate documents; record every file's outcome."""
    return ingest_documents(paths, ctx.lake, ctx.config.ingest, ctx.run_id, ctx.progress)


@contextmanager
def solver_through_proxy(
    ctx: StageContext, endpoints: dict[str, Endpoint]
) -> Iterator[dict[str, Endpoint]]:
    """The endpoints with the solver behind the interception proxy, which records every
    rollout's calls in the lake (`proxy_calls`, grouped by the attempt's rollout id). A proxy
    that listens beyond loopback (`[runner] proxy_host`, for workers on other hosts) gets a
    fresh access key for the run, which only the solver endpoint carries."""
    solver = endpoints["solver"]
    host = ctx.config.runner.proxy_host
    access_key = None if is_loopback(host) else secrets.token_urlsafe(24)
    with running_proxy(
        solver.base_url,
        ctx.lake,
        ctx.run_id,
        api_key=solver.api_key,
        host=host,
        timeout_s=solver.timeout_s,
        access_key=access_key,
    ) as url:
        headers = ((ACCESS_HEADER, access_key),) if access_key else ()
        behind = replace(solver, base_url=url, headers=headers, upstream=solver.server)
        yield {**endpoints, "solver": behind}


def run_llm_batch(
    stage: LLMStage, items: list[str], ctx: StageContext, endpoints: dict[str, Endpoint]
) -> Counter:
    """Process `items` concurrently (bounded by the client) and write the batch's shards.

    An expected failure (an LLM's, no sandbox for code: `ReasonedError`) marks only that item
    `failed` with its reason; any other exception is recorded
    the same way (`internal_error`, with the exception's last line) so one bad item never stops
    the run.
    """
    inputs = stage.load(ctx, items)
    finished = 0
    last_report = time.monotonic()

    async def attempt(item: str, client: LLMClient) -> Outcome:
        try:
            if item not in inputs:
                return Outcome(ctx.status(stage.name, item, "rejected", "input_missing"))
            return await stage.work(ctx, item, inputs[item], client)
        except Interrupted:
            raise  # not finished: pending for the next run
        except ReasonedError as exc:  # an LLM's failure, no sandbox for code, ...
            return Outcome(ctx.status(stage.name, item, "failed", exc.reason, exc.detail))
        except Exception as exc:  # noqa: BLE001 - recorded, visible in `foundry stats`
            last = traceback.format_exception_only(exc)[-1].strip()
            return Outcome(ctx.status(stage.name, item, "failed", "internal_error", last))

    async def guarded(item: str, client: LLMClient) -> Outcome:
        nonlocal finished, last_report
        outcome = await attempt(item, client)
        finished += 1
        if time.monotonic() - last_report >= PROGRESS_EVERY_S:
            last_report = time.monotonic()
            ctx.progress(f"{stage.name}: {finished}/{len(items)} items of this batch")
        return outcome

    if not stage.every_judge:
        endpoints, _ = controls.deciding_judges(endpoints, latest_controls(ctx.lake))

    async def run_all() -> tuple[list[Outcome], list[LLMCall]]:
        """Every item's outcome; on a stop request, those of the items finished by then."""
        client = LLMClient(endpoints, ctx.cache, ctx.run_id, ctx.budget)
        tasks = [asyncio.create_task(guarded(item, client)) for item in items]
        try:
            await _until_done_or_stopped(tasks)
        finally:
            await client.aclose()
        finished = [
            t.result() for t in tasks if t.done() and not t.cancelled() and t.exception() is None
        ]
        return finished, client.drain_calls()

    outcomes, calls = asyncio.run(run_all())
    tables: dict[str, list[Record]] = {}
    for outcome in outcomes:
        for table, records in outcome.records.items():
            tables.setdefault(table, []).extend(records)
    for table, records in tables.items():
        ctx.lake.write(table, records, ctx.run_id)
    ctx.lake.write("status", [s for o in outcomes for s in (*o.parts, o.status)], ctx.run_id)
    ctx.lake.write("llm_calls", calls, ctx.run_id)
    if len(outcomes) < len(items):
        raise Interrupted(f"{stage.name}: stopped with {len(outcomes)} of {len(items)} items done")
    return Counter(f"{o.status.status}:{o.status.reason}" for o in outcomes)


async def _until_done_or_stopped(tasks: list[asyncio.Task]) -> None:
    """Wait for `tasks`; when the process is asked to stop, cancel those still running."""
    pending = set(tasks)
    while pending:
        _, pending = await asyncio.wait(pending, timeout=STOP_POLL_S)
        if pending and interrupt.requested():
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            return


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
            "no judge passed its controls: the panel as configured decides, and its verdicts are"
            " no better than its figures above"
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
    """A task and the text of its evidence chunks (what the open-book judges read)."""

    task: Task
    passage: str


def load_tasks_with_passages(ctx: StageContext, task_ids: list[str]) -> dict[str, ToVerify]:
    tasks = load_tasks(ctx, task_ids)
    chunk_ids = sorted({e.chunk_id for t in tasks.values() for e in t.evidence})
    rows = ctx.lake.rows(
        "SELECT chunk_id, text FROM chunks WHERE list_contains(?, chunk_id)", [chunk_ids]
    )
    texts = {r["chunk_id"]: r["text"] for r in rows}
    return {
        task_id: ToVerify(
            task, "\n\n".join(texts[e.chunk_id] for e in task.evidence if e.chunk_id in texts)
        )
        for task_id, task in tasks.items()
    }


async def verify_one(
    ctx: StageContext, task_id: str, loaded: ToVerify, client: LLMClient
) -> Outcome:
    """The task's family checks it (its verifier's self-check, the judges it needs)."""
    task = loaded.task
    checked: Checked = await family_of(task.kind).verify(task, loaded.passage, client, ctx)
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


def load_tasks(ctx: StageContext, task_ids: list[str]) -> dict[str, Task]:
    tasks = ctx.lake.records("tasks", "list_contains(?, task_id)", [task_ids])
    return {t.task_id: t for t in tasks}


def calibration_plan(ctx: StageContext, solver: str, harness: str) -> calibration.Plan:
    """The run's calibration plan for this solver and harness, made from the outcomes of the
    tasks calibrated by earlier runs (not this one's, so every batch gets the same plan
    whichever finishes first)."""
    key = (solver, harness)
    if key not in ctx.plans:
        history = ctx.lake.rows(
            "SELECT d.n, d.passes FROM difficulty d JOIN status s ON s.item_id = d.task_id"
            f" AND s.stage LIKE 'calibrate%' AND {MEASURED_BY}"
            " WHERE d.solver_model = ? AND d.harness = ? AND s.run_id <> ?",
            [solver, harness, ctx.run_id],
        )
        outcomes = [(r["n"], r["passes"]) for r in history]
        ctx.plans[key] = calibration.plan(ctx.config.calibrate, outcomes)
    return ctx.plans[key]


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
    there are exactly that many and the status says `evaluated`."""

    async def calibrate_one(
        ctx: StageContext, task_id: str, task: Task, client: LLMClient
    ) -> Outcome:
        family = family_of(task.kind)
        harness = calibration_harness(ctx, task, client.endpoint("solver"))
        config = family.attempt_config(ctx.config)
        if fixed_k is None:
            plan = calibration_plan(ctx, client.model("solver"), harness.name)
        else:
            config = config.model_copy(update={"method": "fixed", "k": fixed_k})
            plan = calibration.plan(config, [])
        attempts, difficulty = await calibration.calibrate(
            task, client, config, plan, harness, family.grader(ctx), stage
        )
        detail = f"{difficulty.passes} of {difficulty.n} passed in {harness.name}"
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


EVALUATE = "evaluate"


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


# review: calibrated task -> rubric (answer tasks), reward hacks, remedied task


def pending_review(ctx: StageContext) -> list[str]:
    """Calibrated tasks of the families that are reviewed (those with a hack audit)."""
    reviewed = [kind for kind in reviewed_kinds() if ctx.config.scope.makes(kind)]
    if not reviewed:
        return []
    return pending_items(
        ctx,
        "review",
        "SELECT item_id AS id FROM status s JOIN tasks t ON t.task_id = s.item_id"
        f" WHERE s.stage = 'calibrate' AND s.status = 'done' AND {kind_in(reviewed, 't.kind')}"
        " ORDER BY id",
    )


@dataclass(frozen=True)
class ToReview:
    """A calibrated task and its calibration attempts."""

    task: Task
    attempts: list[Attempt]


def load_tasks_with_attempts(ctx: StageContext, task_ids: list[str]) -> dict[str, ToReview]:
    tasks = load_tasks(ctx, task_ids)
    attempts: dict[str, list[Attempt]] = {}
    for attempt in ctx.lake.records("attempts", "list_contains(?, task_id)", [task_ids]):
        attempts.setdefault(attempt.task_id, []).append(attempt)
    return {task_id: ToReview(task, attempts.get(task_id, [])) for task_id, task in tasks.items()}


async def review_one(
    ctx: StageContext, task_id: str, loaded: ToReview, client: LLMClient
) -> Outcome:
    task = loaded.task
    solver = client.model("solver")  # attempts of re-calibrations and evaluations aside
    mine = [
        a
        for a in loaded.attempts
        if a.solver_model == solver and not (a.stage or "").startswith(EVALUATE)
    ]
    audit = family_of(task.kind).audit
    if audit is None:
        raise LookupError(f"{task.kind} tasks are not reviewed")
    result = await review(task, mine, client, audit)
    records: dict[str, list[Record]] = {
        "rubrics": list(result.rubric),
        "hack_verdicts": list(result.verdicts),
        "reviews": [result.review],
    }
    if result.remedied is not None:
        records["tasks"] = [result.remedied]
        detail = f"{result.review.remedy}: {result.remedied.task_id}"
        return Outcome(ctx.status("review", task_id, "rejected", REMEDIED, detail), records)
    reason = "hackable" if result.review.hackable else "reviewed"
    status = ctx.status("review", task_id, "done", reason, result.review.rubric_error)
    return Outcome(status, records)


# repair: out-of-band task -> a variant one difficulty level harder or easier


def pending_repair(ctx: StageContext) -> list[str]:
    """Tasks out of the band whose review found the verifier sound where their family is
    reviewed (hackable ones would pass their verifier on to the variant) and which the repair
    loop has not settled; a task that stopped at the step limit is taken again once
    `repair.max_steps` is raised."""
    max_steps = ctx.config.repair.max_steps
    if max_steps == 0:
        return []
    rows = ctx.lake.rows(
        "SELECT c.item_id AS id FROM status c JOIN tasks t ON t.task_id = c.item_id"
        " LEFT JOIN status r ON r.item_id = c.item_id AND r.stage = 'review'"
        " AND r.status = 'done' AND r.reason = 'reviewed'"
        " LEFT JOIN status p ON p.item_id = c.item_id AND p.stage = 'repair'"
        " WHERE c.stage = 'calibrate' AND c.status = 'done' AND c.reason <> 'in_band'"
        f" AND (r.item_id IS NOT NULL OR NOT {kind_in(reviewed_kinds(), 't.kind')})"
        f" AND {kinds_in_scope(ctx, 't.kind')}"
        " AND (p.status IS NULL OR p.status = 'failed'"
        " OR (p.reason = 'step_limit' AND TRY_CAST(p.detail AS INTEGER) < ?))"
        " ORDER BY id",
        [max_steps],
    )
    return [row["id"] for row in rows]


# The `neighbours` chunks nearest each given chunk by embedding cosine (ranked on ids alone,
# then joined to their text); vectors of another width or of zero length are never neighbours.
_NEIGHBOURS_SQL = """
WITH cosines AS (
    SELECT e.chunk_id AS of, n.chunk_id,
           list_cosine_similarity(e.embedding, n.embedding) AS similarity
    FROM chunks e JOIN chunks n
      ON n.chunk_id <> e.chunk_id AND len(n.embedding) = len(e.embedding)
    WHERE list_contains(?, e.chunk_id)
), ranked AS (
    SELECT * FROM cosines WHERE NOT isnan(similarity)
    QUALIFY row_number() OVER (PARTITION BY of ORDER BY similarity DESC, chunk_id) <= ?
)
SELECT r.of, n.*, s.path AS source_path
FROM ranked r JOIN chunks n USING (chunk_id) LEFT JOIN sources s ON s.source_id = n.source_id
ORDER BY r.of, r.similarity DESC, r.chunk_id
"""


@dataclass(frozen=True)
class ToRepair:
    """An out-of-band task, the band it was measured in, and what its variants draw on."""

    task: Task
    band: str
    material: Material


def load_repair_material(
    ctx: StageContext, task_ids: list[str], measured_by: str = "calibrate"
) -> dict[str, ToRepair]:
    """Each task with its band (as the stage `measured_by` measured it) and what its variants
    draw on: its source's title, its evidence chunk's text and the chunks nearest that chunk by
    embedding."""
    tasks = load_tasks(ctx, task_ids)
    bands = {
        r["item_id"]: r["reason"]
        for r in ctx.lake.rows(
            "SELECT item_id, reason FROM status WHERE stage = ? AND list_contains(?, item_id)",
            [measured_by, task_ids],
        )
    }
    source_ids = sorted({s.source_id for t in tasks.values() for s in t.source[:1]})
    titles = {
        r["source_id"]: r["title"] or Path(r["path"]).stem
        for r in ctx.lake.rows(
            "SELECT source_id, title, path FROM sources WHERE list_contains(?, source_id)",
            [source_ids],
        )
    }
    chunk_ids = sorted({e.chunk_id for t in tasks.values() for e in t.evidence[:1]})
    passages = {
        r["chunk_id"]: r["text"]
        for r in ctx.lake.rows(
            "SELECT chunk_id, text FROM chunks WHERE list_contains(?, chunk_id)", [chunk_ids]
        )
    }
    neighbours: dict[str, list[Neighbour]] = {}
    for row in ctx.lake.rows(_NEIGHBOURS_SQL, [chunk_ids, ctx.config.repair.neighbours]):
        near = Neighbour(Chunk.from_row(row), row["source_path"] or "")
        neighbours.setdefault(row["of"], []).append(near)
    return {
        task_id: ToRepair(
            task,
            bands.get(task_id, ""),
            Material(
                title=next((titles.get(s.source_id, "") for s in task.source[:1]), ""),
                passage=next((passages.get(e.chunk_id, "") for e in task.evidence[:1]), ""),
                neighbours=[n for e in task.evidence[:1] for n in neighbours.get(e.chunk_id, [])],
            ),
        )
        for task_id, task in tasks.items()
    }


async def repair_one(
    ctx: StageContext, task_id: str, loaded: ToRepair, client: LLMClient
) -> Outcome:
    task, band, material = loaded.task, loaded.band, loaded.material
    family = family_of(task.kind)
    if family.ladder is None:
        return Outcome(ctx.status("repair", task_id, "done", "no_ladder", task.kind))
    move = next_move(band, task.lineage, family.ladder, ctx.config.repair.max_steps)
    if isinstance(move, Stop):
        return Outcome(ctx.status("repair", task_id, "done", move.reason, move.detail))
    failures: list[str] = []
    made = await first_variant(
        family, task, move.levels, move.direction, material, client, ctx, failures
    )
    if made is None:
        reason = f"no_{move.direction}_variant"
        return Outcome(ctx.status("repair", task_id, "done", reason, "; ".join(failures)))
    level, variant = made
    detail = "; ".join([*failures, f"{level}: {variant.task_id}"])
    status = ctx.status("repair", task_id, "done", REPAIRED, detail)
    return Outcome(status, {"tasks": [variant]})


async def first_variant(
    family: Family,
    task: Task,
    levels: Sequence[Level],
    direction: Direction,
    material: Material,
    client: LLMClient,
    ctx: StageContext,
    failures: list[str],
) -> tuple[str, Task] | None:
    """The variant of `task` at the first of `levels` that can be made, with its level's name;
    why each level before it could not be made is appended to `failures`."""
    for level in levels:
        try:
            return level.name, await family.variant(task, level, direction, material, client, ctx)
        except CheckFailure as failure:
            failures.append(f"{level.name}: {failure.reason}")
    return None


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


CHECK_STAGES = (
    LLMStage(
        "controls", pending_controls, load_control_material, measure_controls, every_judge=True
    ),
    LLMStage("verify", pending_verify, load_tasks_with_passages, verify_one),
    LLMStage("calibrate", pending_calibrate, load_tasks, calibrate_into("calibrate")),
    LLMStage("review", pending_review, load_tasks_with_attempts, review_one),
    LLMStage("repair", pending_repair, load_repair_material, repair_one),
)


def llm_stages() -> list[LLMStage]:
    """The pipeline's LLM stages in the order they run: the registered families' generation
    stages (`families.generation_stages`), then the judges' control items, verify, calibrate,
    review and repair, which ask each task's family what it needs."""
    return [*generation_stages(), *CHECK_STAGES]


BatchRunner = Callable[[LLMStage, list[list[str]]], Iterable[Counter]]
"""Runs a stage's batches (some at once, in any order) and yields each one's counts as it
finishes; it starts none once the run's budget is spent."""


def one_at_a_time(
    ctx: StageContext, run_batch: Callable[[LLMStage, int, list[str]], Counter]
) -> BatchRunner:
    """The batch runner that runs each batch with `run_batch`, one after another."""

    def run(stage: LLMStage, groups: list[list[str]]) -> Iterator[Counter]:
        for index, group in enumerate(groups):
            if ctx.budget.exhausted:
                return
            yield run_batch(stage, index, group)

    return run


def run_stages(stages: Sequence[LLMStage], ctx: StageContext, run_batches: BatchRunner) -> dict:
    """Run `stages` in order over their pending items, in batches (a stage ends when all its
    batches have); go round again while a stage derives new tasks (a remedy of the review, a
    variant of the repair), so they are verified and calibrated in the same run. A round takes
    only items no earlier round took, so an item that failed waits for the next run, as does
    what the last round leaves. Once the run's budget is spent no further batch starts: what is
    left stays pending."""
    summary: dict[str, Counter] = {stage.name: Counter() for stage in stages}
    taken: dict[str, set[str]] = {stage.name: set() for stage in stages}
    for _ in range(1 + REMEDY_ROUNDS + ctx.config.repair.max_steps):
        derived = 0
        for stage in stages:
            items = [item for item in stage.pending(ctx) if item not in taken[stage.name]]
            taken[stage.name].update(items)
            groups = batches(items, ctx.config.batch_size)
            done = 0
            for finished, counts in enumerate(run_batches(stage, groups), start=1):
                summary[stage.name].update(counts)
                derived += sum(counts.get(key, 0) for key in DERIVED)
                done += sum(counts.values())
                ctx.progress(f"{stage.name}: batch {finished}/{len(groups)} ({done}/{len(items)})")
            if ctx.budget.exhausted:
                ctx.progress(f"budget reached ({ctx.budget.describe()}): the rest waits")
                return summary
        if not derived:
            break
    return summary


# judge variance: open-book verdicts re-asked with other seeds (a measurement, not a stage)


@dataclass(frozen=True)
class VarianceSample:
    tasks: list[tuple[Task, str]]  # (task, passage)
    original: dict[tuple[str, str], str]  # (task_id, judge) -> first open-book decision


def variance_sample(ctx: StageContext, tasks: int) -> VarianceSample:
    """Up to `tasks` tasks with open-book verdicts under the current prompt."""
    rows = ctx.lake.rows(
        "SELECT task_id, judge, decision FROM verdicts"
        " WHERE \"check\" = 'open_book' AND prompt_version = ?",
        [answerability.OPEN_BOOK.version],
    )
    original = {(r["task_id"], r["judge"]): r["decision"] for r in rows}
    sample = sorted({task_id for task_id, _ in original})[:tasks]  # ids are hashes: unbiased
    loaded = load_tasks_with_passages(ctx, sample)
    return VarianceSample([(v.task, v.passage) for v in loaded.values() if v.passage], original)


def measure_variance(
    ctx: StageContext,
    endpoints: dict[str, Endpoint],
    sample: VarianceSample,
    seeds: int,
    temperature: float | None,
) -> list[VerdictRerun]:
    """Re-ask the sample's open-book verdicts with `seeds` other seeds; store the reruns."""
    reruns, calls = asyncio.run(
        reask(
            sample.tasks,
            sample.original,
            endpoints,
            ctx.cache,
            ctx.run_id,
            seeds,
            temperature,
        )
    )
    ctx.lake.write("verdict_reruns", reruns, ctx.run_id)
    ctx.lake.write("llm_calls", calls, ctx.run_id)
    return reruns
