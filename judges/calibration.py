"""Pass-rate calibration (first version): k solver attempts, then interval, band and pool."""

from __future__ import annotations

from data.config import CalibrateConfig
from data.llm import LLMClient, settle
from data.records import Attempt, Difficulty, Task, content_id, seed_for
from harnesses import closed_book
from judges.equivalence import grade
from judges.passrate import band, learnability, pass_at_k, pool, wilson_interval


async def calibrate(
    task: Task, llm: LLMClient, config: CalibrateConfig
) -> tuple[list[Attempt], Difficulty]:
    """Attempt `task` k times without its source and measure how often the solver passes."""
    _, seed = seed_for("calibrate", task.task_id)
    replies = await closed_book.attempt(
        task, llm, config.k, temperature=config.temperature, max_tokens=config.max_tokens, seed=seed
    )
    solver = llm.model("solver")
    scores = await settle([grade(task, reply.text, llm) for reply in replies])
    attempts = [
        Attempt(
            attempt_id=content_id(
                task.task_id, closed_book.NAME, solver, seed, i, config.temperature
            ),
            task_id=task.task_id,
            index=i,
            harness=closed_book.NAME,
            solver_model=solver,
            temperature=config.temperature,
            seed=seed + i,
            response=reply.text[:2000],
            reward=result.reward,
            usage=reply.usage,
            reason=result.why[:300],
        )
        for i, (reply, result) in enumerate(zip(replies, scores, strict=True))
    ]
    passes = sum(a.reward >= 1.0 for a in attempts)
    n = len(attempts)
    rate = passes / n
    low, high = wilson_interval(passes, n, config.confidence)
    difficulty = Difficulty(
        task_id=task.task_id,
        solver_model=solver,
        harness=closed_book.NAME,
        n=n,
        passes=passes,
        pass_rate=rate,
        pass_at_k=pass_at_k(n, passes, n),
        ci_low=low,
        ci_high=high,
        confidence=config.confidence,
        band=band(rate, config.band_low, config.band_high),
        pool=pool(rate),
        learnability=learnability(rate),
    )
    return attempts, difficulty
