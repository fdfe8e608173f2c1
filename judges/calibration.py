"""Pass-rate calibration: solver attempts in rounds, then interval, band and pool.

The adaptive method asks `judges.adaptive` after every round whether the band is settled; the
fixed method is the same loop with one round of k attempts, labelled by the point estimate. A
task whose verifier asks the judge panel is not attempted while every judge is below its control
bar: its pass rate would rest on their word, so it is held (`judges.panel.Held`). An attempt
the grader could not judge (`NoVerdict`: the sandbox did not start, a judge was down) is kept
without a reward and another takes its place in the round: n counts verdicts only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from data.config import CalibrateConfig
from data.lake import Attempt, Difficulty, Task, content_id, seed_for
from data.llm import LLMClient, settle
from data.runtime.errors import ReasonedError
from harnesses.base import Harness
from judges.adaptive import (
    LABELS,
    SAMPLE,
    BandRule,
    Policy,
    Prior,
    matching_cost,
    matching_policy,
    solve,
)
from judges.panel import Held, below_bar
from judges.passrate import learnability, pass_at_k, pool, wilson_interval
from judges.score import NoScore, Score, verdict
from judges.task_prior import Earlier, Features, TaskPriors, spread
from judges.verifier_types import grade, verifier_type


@dataclass(frozen=True)
class Plan:
    """How one task is calibrated: the stopping policy, where its prior came from ("jeffreys",
    "empirical:<earlier tasks>" pooled, "task:<earlier tasks>" its own), the prior's mean and
    how many earlier tasks it counts as like this one."""

    method: str
    policy: Policy
    prior: str
    prior_mean: float | None = None
    prior_alike: float | None = None


def plan(config: CalibrateConfig, history: Sequence[tuple[int, int]]) -> Plan:
    """One plan for every task: `history` holds earlier tasks' (attempts, passes) for this
    solver and harness, used as the prior once there are `prior_min_tasks` of them."""
    rule = BandRule(config.band_low, config.band_high, config.indifference)
    if config.method == "fixed":
        return Plan("fixed", fixed_policy(rule, config.k), "")
    if len(history) >= config.prior_min_tasks:
        prior, name = Prior.fit(history), f"empirical:{len(history)}"
    else:
        prior, name = Prior.jeffreys(), "jeffreys"
    policy = matching_policy(
        prior, rule, config.reference_k, config.round_size, config.max_attempts
    )
    return Plan("adaptive", policy, name, prior.mean())


class Planner:
    """The plans of one solver's calibrations, from its earlier tasks (`history`).

    With `prior = "task"` and `prior_min_tasks` earlier tasks, each task gets its own prior
    (`judges.task_prior`) and a policy solved for it at one attempt cost for all tasks, matched
    so that the earlier tasks' own priors are on average as accurate as fixed `reference_k`.
    Otherwise, and for `prior = "pooled"`, every task in one environment shares one plan
    (`plan`)."""

    MATCHED_ON = 100  # earlier tasks whose priors set the common attempt cost

    def __init__(self, config: CalibrateConfig, history: Sequence[Earlier]) -> None:
        self.config = config
        self.rule = BandRule(config.band_low, config.band_high, config.indifference)
        self.history = list(history)
        self.priors: TaskPriors | None = None
        self.cost = 0.0
        self._pooled: dict[str, Plan] = {}
        enough = len(self.history) >= config.prior_min_tasks
        if config.method == "adaptive" and config.prior == "task" and enough:
            self.priors = TaskPriors.fit(self.history)
            earlier = self.priors.history
            chosen = spread(len(earlier), self.MATCHED_ON)
            own = [self.priors.prior_of(earlier[i].features).prior for i in chosen]
            self.cost = matching_cost(
                own, self.rule, config.reference_k, config.round_size, config.max_attempts
            )

    def plan_for(self, task: Task, environment: str) -> Plan:
        """`task`'s plan when it is attempted in `environment`."""
        return self.plan_of(Features.of(task, environment))

    def plan_of(self, features: Features) -> Plan:
        """The plan of a task with these features."""
        if self.priors is None:
            environment = features.environment
            if environment not in self._pooled:
                outcomes = [
                    (e.attempts, e.passes)
                    for e in self.history
                    if e.features.environment == environment
                ]
                self._pooled[environment] = plan(self.config, outcomes)
            return self._pooled[environment]
        own = self.priors.prior_of(features)
        policy = solve(
            own.prior, self.rule, self.cost, self.config.round_size, self.config.max_attempts
        )
        name = f"task:{len(self.priors.history)}"
        return Plan("adaptive", policy, name, own.prior.mean(), own.alike)


def fixed_policy(rule: BandRule, k: int) -> Policy:
    """One round of k attempts, labelled by the point estimate."""
    labels = np.array([rule.point_label(s / k) for s in range(k + 1)])
    return Policy(
        {k: labels},
        round_size=k,
        max_attempts=k,
        cost=0.0,
        expected_error=float("nan"),
        expected_attempts=float(k),
    )


Grader = Callable[[Task, str], Awaitable[Score]]


def graded(result: Score | NoScore) -> dict[str, Any]:
    """An attempt's `reward`, `reason` and `no_verdict` from what its grading gave."""
    if isinstance(result, NoScore):
        return {"reward": None, "reason": result.detail[:300], "no_verdict": result.reason}
    return {"reward": result.reward, "reason": result.why[:300], "no_verdict": ""}


class Unjudged(ReasonedError):
    """A calibration given up for want of verdicts: a round of attempts none of which got one
    (the grader is down), or as many attempts without one as the plan's most attempts. Every
    attempt made is in `attempts`, to be recorded; a later run takes the task again."""

    def __init__(self, attempts: list[Attempt]) -> None:
        missing = [a for a in attempts if a.reward is None]
        last = missing[-1]
        detail = f"{len(missing)} of {len(attempts)} attempts: {last.no_verdict}: {last.reason}"
        super().__init__("no_verdict", detail[:300])
        self.attempts = attempts


async def calibrate(
    task: Task,
    llm: LLMClient,
    config: CalibrateConfig,
    how: Plan,
    harness: Harness,
    grader: Grader | None = None,
    stage: str = "calibrate",
) -> tuple[list[Attempt], Difficulty]:
    """Attempt `task` through `harness` (never with its source in the prompt), round by round,
    until the plan settles its band; `grader` scores each reply (default: `verifier_types.grade`,
    the task's answer verifier). The difficulty row names `stage` as what measured it.

    An attempt the grader could not judge (`NoVerdict`) is kept without a reward and counts in
    no round: another attempt takes its place, so the pass rate rests on verdicts alone. Raises
    `Unjudged` where the verdicts run out, and `Held` for a judged verifier whose every judge is
    below its control bar."""
    if grader is None and verifier_type(task.verifier).judged and below_bar(llm):
        raise Held()
    score = grader or (lambda task, completion: grade(task, completion, llm))
    # calibrations share their seeds, evaluations theirs: an evaluation samples afresh
    _, seed = seed_for(stage.split(":")[0], task.task_id)
    solver = llm.model("solver")
    attempts: list[Attempt] = []

    async def attempted(count: int) -> list[Attempt]:
        """`count` more attempts, each scored (or not: no verdict)."""
        start = len(attempts)
        ids = [
            content_id(task.task_id, harness.name, solver, seed, i, config.temperature)
            for i in range(start, start + count)
        ]
        replies = await harness.attempt(
            task,
            llm,
            ids,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            seed=seed + start,
        )
        results = await settle([verdict(score(task, reply.text)) for reply in replies])
        return [
            Attempt(
                attempt_id=ids[i - start],
                rollout_id=reply.rollout_id,
                task_id=task.task_id,
                index=i,
                harness=harness.name,
                solver_model=solver,
                temperature=config.temperature,
                seed=seed + i,
                response=reply.text,  # whole: the SFT projection trains on it
                usage=reply.usage,
                stage=stage,
                **graded(result),
            )
            for i, (reply, result) in enumerate(zip(replies, results, strict=True), start=start)
        ]

    n = passes = 0
    while (decision := how.policy.decide(n, passes)) == SAMPLE:
        filled = n + how.policy.round_size
        while n < filled:  # a round is filled with verdicts
            made = await attempted(filled - n)
            attempts.extend(made)
            judged = [a for a in made if a.reward is not None]
            n, passes = n + len(judged), passes + sum(a.passed for a in judged)
            if not judged or len(attempts) - n >= how.policy.max_attempts:
                raise Unjudged(attempts)
    rate = passes / n
    low, high = wilson_interval(passes, n, config.confidence)
    difficulty = Difficulty(
        task_id=task.task_id,
        solver_model=solver,
        harness=harness.name,
        stage=stage,
        n=n,
        passes=passes,
        pass_rate=rate,
        pass_at_k=pass_at_k(n, passes, n),
        ci_low=low,
        ci_high=high,
        confidence=config.confidence,
        band=LABELS[decision],
        pool=pool(rate),
        learnability=learnability(rate),
        method=how.method,
        prior=how.prior,
        prior_mean=how.prior_mean,
        prior_alike=how.prior_alike,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
    )
    return attempts, difficulty
