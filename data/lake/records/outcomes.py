"""What the stages record about tasks: judge verdicts and consensus, gates, attempts and
proxy calls, difficulty, evaluations, loop rounds, judge controls, splits, rubric items,
hack verdicts, reviews, item status and LLM calls."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import model_validator

from data.lake.records.base import Band, ItemStatus, Pool, Record, Remedy, utcnow
from data.lake.records.values import Usage


class Verdict(Record):
    """One judge's decision on one check of one task."""

    verdict_id: str
    task_id: str
    check: Literal["open_book", "closed_book", "trace_outcome", "instruction"]
    judge: str
    judge_model: str
    prompt_version: str
    decision: Literal["pass", "fail", "error"]  # error: the judge gave no usable verdict
    confidence: float | None
    reason: str
    response: str
    usage: Usage


class Consensus(Record):
    """The panel's combined decision on one check of one task."""

    task_id: str
    check: Literal["open_book", "closed_book", "trace_outcome", "instruction"]
    rule: str
    decision: Literal["pass", "fail", "undecided"]
    passes: int
    fails: int
    errors: int
    agreement: float


# a code task's admission gates, in the order they are taken (`judges.unit_tests`)
GateName = Literal[
    "reference",
    "fresh_runs",
    "outside_check",
    "no_other_copy",
    "empty_attempt",
    "do_nothing",
    "mutants",
    "red_team",
]


class Gate(Record):
    """One admission gate a code task was put through (`judges.unit_tests`) and what it saw;
    `share` where the gate measures one (fresh runs passed, mutants its tests killed). A gate
    that could not run (no mutant to try) is `ran=False` and never `passed`: it keeps the
    task out as a failed one does."""

    task_id: str
    gate: GateName
    passed: bool
    detail: str
    share: float | None = None
    ran: bool = True


class VerdictRerun(Record):
    """One judge's verdict re-asked with another seed, beside the verdict it gave first."""

    rerun_id: str
    task_id: str
    check: Literal["open_book", "closed_book", "trace_outcome", "instruction"]
    judge: str
    judge_model: str
    seed: int
    temperature: float
    decision: Literal["pass", "fail", "error"]
    original: Literal["pass", "fail", "error"]
    run_id: str


class Attempt(Record):
    """One solver rollout on one task, with its reward, or with none where the grader could not
    judge it (`no_verdict` says why): such an attempt is no failure, and counts in no pass
    rate."""

    attempt_id: str
    task_id: str
    index: int
    harness: str
    solver_model: str
    temperature: float
    seed: int
    response: str
    reward: float | None  # None: no verdict
    usage: Usage
    reason: str = ""  # why the verifier gave this reward ("exact match", "token F1 0.67 >= 0.6")
    rollout_id: str = ""  # the proxy's rollout holding this attempt's model calls
    # what it was made for: `calibrate` (or `calibrate:<solver>`), or an evaluation
    # (`evaluate:k<K>:<policy>`); None: made before attempts named their stage (calibration)
    stage: str | None = None
    # why there is no reward, a short stable reason (`sandbox_unavailable`, `grader_failed`,
    # `grader_timeout`, `repository_not_mirrored`, `world_failed`, `no_world`,
    # `judge_undecided`: docs/reward-integrity.md, "No verdict"); "" where there is one
    no_verdict: str = ""

    @model_validator(mode="after")
    def _reward_or_why_not(self) -> Attempt:
        if (self.reward is None) != bool(self.no_verdict):
            raise ValueError("an attempt has a reward, or no verdict and its reason: not both")
        return self

    @property
    def passed(self) -> bool:
        """Whether its verdict is a pass (a reward of 1)."""
        return self.reward is not None and self.reward >= 1.0

    @property
    def failed(self) -> bool:
        """Whether its verdict is short of a pass (no verdict is neither)."""
        return self.reward is not None and self.reward < 1.0


class ProxyCall(Record):
    """One chat completion that went through the interception proxy, request and response.

    `rollout_id` groups the calls of one rollout (an `X-Rollout-Id` header, else a hash of the
    API key). An SDK retry resends the same body and replaces the failed attempt's record.
    """

    call_id: str
    rollout_id: str
    started_at: datetime
    model: str
    messages: str  # JSON: the request's messages, tool results included
    params: str  # JSON: sampling and tool settings (temperature, seed, n, tools, ...)
    response: str  # JSON: the choices as returned (assembled from the stream when streamed)
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    status: int  # HTTP status returned to the client (502: upstream unreachable)
    error: str
    stream: bool
    retry: int  # the SDK's retry count of the recorded attempt


class Difficulty(Record):
    """The solver's measured pass rate on one task, and the band it puts the task in.

    A row is keyed by what measured it: the calibrate stage (`calibrate`, or `calibrate:<solver>`
    for a re-calibration), the solver and the harness. With the adaptive method `band` is the
    sequential rule's decision under its prior, which can differ from a threshold on the raw
    `pass_rate` for tasks near a band edge.
    """

    task_id: str
    solver_model: str
    harness: str
    # None: measured before rows named their stage (`data.lake.stage_funnel.MEASURED_BY` matches
    # those)
    stage: str | None = None
    n: int
    passes: int
    pass_rate: float
    pass_at_k: float  # pass@n: at least one of the n attempts passed (unbiased estimate)
    ci_low: float
    ci_high: float
    confidence: float
    band: Band
    pool: Pool
    learnability: float
    method: str = "fixed"  # "adaptive" or "fixed"
    # adaptive: "jeffreys", "empirical:<tasks it was learnt from>" (one prior for all) or
    # "task:<earlier tasks>" (its own, `judges.task_prior`); the prior's mean pass rate and how
    # many earlier tasks it counted as like this one
    prior: str = ""
    prior_mean: float | None = None
    prior_alike: float | None = None
    temperature: float | None = None  # the solver's sampling settings
    max_tokens: int | None = None


class Evaluation(Record):
    """A policy's pass rate on one split of a taskset version (`foundry evaluate`): k attempts
    per task in each task's own environment, graded by its family's verifier. The per-task
    results are the `difficulty` rows of its `stage`, the attempts those of the same stage."""

    evaluation_id: str  # hashes the taskset version, split, stage
    taskset: str  # name/version, e.g. `docqa/v0003`
    split: str
    policy: str  # the policy's label (`data.llm.served_policy`)
    policy_spec: str  # as it was named
    stage: str  # `evaluate:k<K>:<policy>`
    k: int
    tasks: int  # tasks of the split evaluated
    missing: int  # tasks of the split this lake does not hold or could not evaluate
    attempts: int
    passes: int
    pass_rate: float  # passes / attempts (every task weighs k)
    ci_low: float  # Wilson interval over the attempts
    ci_high: float
    confidence: float
    by_kind: dict[str, list[int]]  # kind -> [attempts, passes]
    recorded_at: datetime


class LoopRound(Record):
    """One round of `foundry loop`: the taskset version it exported (measured against the
    round's policy), the policy it trained from it, their held-out pass rates, and what the
    new policy's failures made for the next round."""

    round_id: str  # hashes the loop and the round
    loop: str  # the loop's name (its taskset is `<export name>-<loop>`)
    round: int  # 1, 2, ...
    taskset: str  # name/version of the round's export
    tasks: int
    train_tasks: int
    eval_tasks: int
    policy: str  # the label of the policy the round started from
    trained: str  # the label of the policy it made (or was given)
    trained_spec: str  # how the loop names it (a model folder, `MODEL@URL`, ...)
    k: int  # attempts per eval task
    before: float | None  # the held-out pass rate of `policy`; None: no eval task
    after: float | None  # of `trained`
    before_ci: list[float]  # [low, high]
    after_ci: list[float]
    difference: float | None  # mean per-task difference, after minus before
    difference_ci: list[float]  # its bootstrap interval ([] without one)
    steered: dict[str, int]  # the steering stage's outcomes (`status:reason` -> tasks)
    targets: dict[str, int]  # failure kind -> tasks made to target it
    episodes: int  # rollouts of the trained policy ingested as traces
    recorded_at: datetime


class JudgeControl(Record):
    """One judge's accuracy on control items made from the run's chunks (`judges.controls`):
    questions whose answer the passage shows, which it must answer, and wrong answers, which it
    must reject."""

    control_id: str  # hashes the role, model, prompts and number of items
    role: str  # `judge:<n>`
    model: str
    items: int
    correct: int
    unanswered: int  # items it gave no reply to (counted wrong)
    accuracy: float
    threshold: float  # `[verify] control_accuracy`
    competent: bool
    by_kind: dict[str, list[int]]  # "answer" / "reject" -> [items, correct]
    recorded_at: datetime


class SplitAssignment(Record):
    """Which side of the train/eval split a group of related tasks is on (`data.export.splits`):
    kept in the lake so that every later export of any taskset puts the group on the same side."""

    group_key: str  # e.g. `document:<source_id>`, `commit:<sha>`, `intent:<label>`
    split: Literal["train", "eval"]
    eval_share: float  # the share the group was assigned under
    assigned_at: datetime


class RubricItem(Record):
    """One checkable item a correct answer meets, distilled from one failed solver attempt."""

    rubric_id: str
    task_id: str
    item: str  # e.g. "fills the blank with 1887"
    category: str  # the kind of failure: wrong_answer, no_answer, several_answers, ...
    failure: str  # what went wrong in the attempt it came from, in the judge's words
    attempt_id: str
    judge_model: str
    prompt_version: str


HackPattern = Literal[
    "hedged_list",  # answers and rubric-graded replies
    "echoes_question",
    "format_gaming",
    "padding",
    "special_cases_tests",  # code
    "weakens_checks",
    "call_spam",  # tool calls
    "out_of_scope_calls",
    "other",
]


class HackVerdict(Record):
    """One judge's view of whether a rewarded attempt truly does what the task asks."""

    verdict_id: str
    task_id: str
    attempt_id: str
    judge: str
    judge_model: str
    prompt_version: str
    decision: Literal["genuine", "hack", "error"]  # error: the judge gave no usable verdict
    pattern: HackPattern | None
    reason: str


class Review(Record):
    """What reviewing a calibrated task found: rubric items, reward hacks and the remedy.

    A remedy is a tighter verifier that rejects every flagged attempt and still accepts the gold;
    it makes a new task (`remedied_task_id`) that goes through verification again. When no
    remedy holds, or its family has none (code and tool-use tasks: `no_remedy`), the task stays
    `hackable` and is exported with that flag.
    """

    task_id: str
    rubric_items: int
    checked_attempts: int
    hack_attempts: list[str]
    hackable: bool
    remedy: Remedy
    remedied_task_id: str
    rubric_error: str  # why no rubric came back, if the judge's replies were unusable


class Status(Record):
    """The outcome of one item at one stage; the latest row per (stage, item_id) wins.

    `failed` (e.g. the LLM kept erroring) is retried by the next run; `done` and `rejected` are
    final.
    """

    stage: str
    item_id: str
    status: ItemStatus
    reason: str
    detail: str
    run_id: str
    recorded_at: datetime

    @classmethod
    def now(
        cls, stage: str, item_id: str, status: ItemStatus, reason: str, detail: str, run_id: str
    ) -> Status:
        """A status recorded at this moment (details are capped at 2,000 characters)."""
        return cls(
            stage=stage,
            item_id=item_id,
            status=status,
            reason=reason,
            detail=detail[:2000],
            run_id=run_id,
            recorded_at=utcnow(),
        )


class LLMCall(Record):
    """Usage of one LLM request (cache hits included, flagged)."""

    call_id: str
    run_id: str
    role: str
    model: str
    cached: bool
    ok: bool
    error: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost_usd: float | None  # None: a live call to a model with no price (`data.costs.prices`)
    recorded_at: datetime
    stage: str = ""  # the stage that asked (`foundry run --plan` averages by it)
    item: str = ""  # the stage's item it asked for (a task, a chunk, a commit, ...)


class Decision(Record):
    """A person's decision on a task (`foundry curate`), appended and never overwritten: the
    latest decision on a task is the one that holds. An edit names the task it made
    (`edited_task_id`), which is verified and calibrated again before it can be exported."""

    decision_id: str
    task_id: str
    decision: Literal["accept", "reject", "edit"]
    reason: str  # a rejection's reason from `data.lake.curation.REJECTION_REASONS`; "" otherwise
    note: str  # the reviewer's own words
    edits: dict[str, str | list[str]]  # an edit: the fields changed and their new values
    edited_task_id: str
    reviewer: str
    decided_at: datetime
