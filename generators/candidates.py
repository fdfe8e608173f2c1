"""What a generator returns for each candidate task: the task, or why it was dropped."""

from __future__ import annotations

from dataclasses import dataclass

from data.lake import Task


@dataclass(frozen=True)
class Rejection:
    """Why a candidate was dropped; `detail` keeps what was generated, for inspection."""

    candidate: str
    reason: str
    detail: str


@dataclass(frozen=True)
class Candidate:
    candidate: str
    task: Task
