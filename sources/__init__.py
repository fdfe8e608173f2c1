"""The source types, one module each; a new type of source is a module and a line in
`REGISTERED`.

The CLI (`foundry ingest NAME`, `foundry run --NAME`), the Prefect flows (`ingest`, `pipeline`),
the deployments (`[sources]` for the nightly run, the adhoc form's fields) and the bundled
samples of a first run are all built from this list, in its order (the order of ingestion).
"""

from __future__ import annotations

from collections.abc import Mapping

from data.config import ConfigError
from sources import documents, repositories, traces, worlds
from sources.base import Source

REGISTERED: list[Source] = [documents.SOURCE, traces.SOURCE, worlds.SOURCE, repositories.SOURCE]


def source_named(name: str) -> Source:
    """The source type called `name` (or one of its aliases)."""
    for source in REGISTERED:
        if name == source.name or name in source.aliases:
            return source
    raise ConfigError(f"no source type is called {name!r} (known: {', '.join(names())})")


def names() -> list[str]:
    """Every registered source type's name."""
    return [source.name for source in REGISTERED]


def check_sources(given: Mapping[str, object]) -> None:
    """Refuse (`ConfigError`, one line) sources keyed by a name no source type has."""
    for name in given:
        source_named(name)
