"""The shape of the project's expected failures: a short stable reason (counted in the funnel)
and a detail for people; and the one a grader raises when it could not judge an attempt."""

from __future__ import annotations


class ReasonedError(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class NoVerdict(ReasonedError):
    """The grader could not judge an attempt: its own machinery failed (the sandbox did not
    start, the workspace or test environment could not be made, the grader's run was cut off
    where the reference's was too, a judge gave no usable answer). Not the attempt's doing, so
    never a reward of 0: the attempt is recorded without one and left out of pass rates, and a
    trainer's reward function gives None."""
