"""The source types, one module each; a new type of source is a module and a line in
`REGISTERED`.

The CLI (`foundry ingest NAME`, `foundry run --NAME`), the Prefect flows (`ingest`, `pipeline`),
the deployments (`[sources]` for the nightly run, the adhoc form's fields) and the bundled
samples of a first run are all built from this list, and so is the grouping of the train/eval
split (`groupings()`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from data.config import ConfigError
from data.export import Grouping
from data.registry import registered_for_now
from sources import documents, repositories, traces, worlds
from sources.base import Source

# in the order a taskset row is offered to them for its split keys (`data.export.splits.group_keys`:
# the first type with keys for the row groups it), which is also the order of ingestion
REGISTERED: list[Source] = [repositories.SOURCE, worlds.SOURCE, traces.SOURCE, documents.SOURCE]


def source_named(name: str) -> Source:
    """The source type called `name` (or one of its aliases)."""
    for source in REGISTERED:
        if name == source.name or name in source.aliases:
            return source
    raise ConfigError(f"no source type is called {name!r} (known: {', '.join(names())})")


def names() -> list[str]:
    """Every registered source type's name."""
    return [source.name for source in REGISTERED]


def groupings() -> list[Grouping]:
    """How the tasks of each source type group for the train/eval split, in registry order."""
    return [source.grouping for source in REGISTERED]


def bare() -> Source:
    """The source type whose items `foundry run` takes as positional arguments."""
    return next(source for source in REGISTERED if source.bare)


def check_sources(given: Mapping[str, object]) -> None:
    """Refuse (`ConfigError`, one line) sources keyed by a name no source type has."""
    for name in given:
        source_named(name)


@contextmanager
def registered(source: Source) -> Iterator[Source]:
    """`source` registered for the duration (a source type that lives outside this package,
    e.g. in a test module), last: its rows are offered to it for split keys after the others'."""
    if source.name in names():
        raise ValueError(f"a source type is already called {source.name!r}")
    with registered_for_now(REGISTERED, source):
        yield source
