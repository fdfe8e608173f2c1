"""Settings of curation by people (`[review]`), which the lake records."""

from __future__ import annotations

from data.settings import Settings


class ReviewConfig(Settings):
    """Curation by people (`foundry curate`, data/lake/curation.py): rejected and edited-away tasks
    are never exported; with `required`, only the tasks a person accepted (or edited) are."""

    required: bool = False
