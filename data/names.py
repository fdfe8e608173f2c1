"""Names safe in paths and ids, made from free text (a model's name, a folder's)."""

from __future__ import annotations

import re


def slug(text: str) -> str:
    """`text` with every run of characters other than letters, digits, `.`, `_` and `-` made
    one `-` (a name safe in paths and ids)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")
