"""What the `foundry` commands share: the exit statuses, the Prefect environment, `--home` and
`--config` with the settings, home and lake they name, `--band`, and `foundry run`'s sources.
Each command's own arguments are in `flows/commands_args.py`, and the parser is built from the
command table (`flows/commands.py`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sources import REGISTERED as SOURCES
from sources import bare as bare_source

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_MODEL_SERVER = 3
EXIT_ALL_CALLS_FAILED = 4
EXIT_BROKEN_PIPE = 141  # as a shell reports a command that SIGPIPE ended
# the environment a command that runs flows or serves deployments sets (unless already set)
QUIET_PREFECT = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "60",
    "TOKENIZERS_PARALLELISM": "false",
}


def band_of(values: list[str] | None) -> tuple[float, float] | None:
    if values is None:
        return None
    low, high = (float(v) for v in values)
    if not 0 <= low <= high <= 1:
        raise argparse.ArgumentTypeError(f"--band needs 0 <= LO <= HI <= 1, got {low} {high}")
    return low, high


def home_options(default: object = None) -> argparse.ArgumentParser:
    """`--home` and `--config`, as a parent parser. A second-level command (`ingest docs`) takes
    them with `argparse.SUPPRESS` as default, so that its None does not overwrite what its group
    parsed before it (`foundry ingest --home H docs`)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--home",
        metavar="DIR",
        default=default,
        help="data folder (default $FOUNDRY_HOME, else the configuration's home, else ./.foundry)",
    )
    options.add_argument(
        "--config",
        metavar="FILE",
        default=default,
        help="foundry.toml to use (default $FOUNDRY_CONFIG, else ./foundry.toml, else the"
        " home's foundry.toml: --home, else $FOUNDRY_HOME, else ./.foundry; else the built-in"
        " defaults)",
    )
    return options


def run_sources(args: argparse.Namespace) -> dict[str, list[str]]:
    """`foundry run`'s items by source type: its `--NAME` flags and its bare paths."""
    sources = {source.name: list(getattr(args, source.name)) for source in SOURCES}
    sources[bare_source().name] += args.paths
    return sources


def config_of(args: argparse.Namespace):
    from data.config import load_config

    return load_config(Path(args.config) if args.config else None, home_of(args))


def lake_of(args: argparse.Namespace):
    from data.lake import Lake

    return Lake(config_of(args).home)


def home_of(args: argparse.Namespace) -> Path | None:
    return Path(args.home).resolve() if args.home else None
