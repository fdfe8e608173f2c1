"""What a source type declares: the one record the CLI, the Prefect flows and deployments, the
adhoc form and the pipeline read, so a new type of source is a module and a registry line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from data.config import FoundryConfig, Settings
from data.export import Grouping
from data.lake import Lake
from families.stage import StageContext

# a source's reader: its items (paths, URLs), the run, the options its CLI offers -> outcomes
Reader = Callable[[list[str], StageContext, Mapping[str, Any]], dict[str, Any]]
# how many units of work its items hold that the lake has not ingested yet, counted without
# reading them for meaning
Estimator = Callable[[list[str], FoundryConfig, Lake], int]


@dataclass(frozen=True)
class Source:
    """One type of source.

    `name` is its key everywhere: `foundry ingest NAME`, `foundry run --NAME`, `[sources] NAME`
    in the configuration, the pipeline's and the adhoc form's `sources` field. `read` ingests
    items into the lake (recording each item's outcome, never raising for a bad one) and returns
    the counts by outcome; `tables` are the lake tables it fills (a lake with none of any
    source's rows gets the bundled samples); `sample` gives the bundled sample's items, made
    under the run's home where they need building. `grouping` is how the tasks made from it
    group for the train/eval split (`data.export.splits`). `bare`: its items are also `foundry
    run`'s positional arguments. `options` are the extra flags of its ingest command (name -> help),
    passed to `read`; `aliases` other names its ingest command answers.

    For `foundry run --plan`: a unit of work is an item of its `unit_stage` (the first stage
    that works on what it ingested: a chunk, a trace, a world, a commit), `estimate` counts the
    units a list of items adds to the lake before anything is read into it, and `unit_cap` is
    the setting that limits them in all (None: none).
    """

    name: str
    help: str
    items: str  # what one item is, for the CLI and the form
    read: Reader
    tables: tuple[str, ...]
    sample: Callable[[StageContext], list[str]]
    grouping: Grouping
    unit_stage: str
    estimate: Estimator
    unit_cap: Callable[[FoundryConfig], int | None] = lambda config: None
    # its own settings, if it has any: `[extensions.<name>]`, read with
    # `data.config.extension_settings` (by its reader, `unit_cap`, its estimate)
    settings: type[Settings] | None = None
    bare: bool = False
    options: Mapping[str, str] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
