"""Settings of production traces (`[traces]`): scrubbing, intent clustering, task making."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from data.settings import Settings


class TracesConfig(Settings):
    """Production traces: scrubbing, intent clustering, and the tasks made from them."""

    # extra scrubbing, kind -> regular expression, e.g. {employee_id = 'EMP-\\d{5}'} replaces
    # matches by [EMPLOYEE_ID]; a named group `secret` limits the replacement to that group
    scrub_patterns: dict[str, str] = Field(default_factory=dict)
    # how phone numbers without a country code are read: each region in turn (ISO 3166 codes)
    phone_regions: list[str] = Field(default_factory=lambda: ["US"], min_length=1)
    # intent clustering: requests closer than this cosine distance (average link) share a cluster
    cluster_distance: float = Field(default=0.7, gt=0, lt=2)
    max_traces: int | None = Field(default=None, ge=1)  # traces turned into tasks, in all
    duplicate_threshold: float = Field(default=0.92, gt=0, le=1)  # of an existing task's prompt
    attempt_max_tokens: int = Field(default=400, ge=16)  # a solver's reply to a trace task
    # a JSONL line or a whole .json trace file over this is refused as too_large (unread)
    max_record_bytes: int = Field(default=16_000_000, ge=1)

    @field_validator("scrub_patterns")
    @classmethod
    def _compiles(cls, patterns: dict[str, str]) -> dict[str, str]:
        for kind, pattern in patterns.items():
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", kind):
                raise ValueError(f"scrub pattern name {kind!r}: letters, digits and _ only")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"scrub pattern {kind!r} does not compile: {exc}") from exc
        return patterns
