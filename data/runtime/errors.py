"""The shape of the project's expected failures: a short stable reason (counted in the funnel)
and a detail for people."""

from __future__ import annotations


class ReasonedError(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
