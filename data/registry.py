"""What every registry shares: an entry registered for the duration of a block."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

Entry = TypeVar("Entry")


@contextmanager
def registered_for_now(registry: list[Entry], entry: Entry) -> Iterator[Entry]:
    """`entry` appended to `registry` for the duration (one that lives outside its package,
    e.g. in a test module), removed after even if the block raises."""
    registry.append(entry)
    try:
        yield entry
    finally:
        registry.remove(entry)
