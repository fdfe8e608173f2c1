"""Configuration: `foundry.toml` into typed settings, with the embedded default when silent.

Lookup order: `--config`, else `$FOUNDRY_CONFIG`, else `./foundry.toml`, else the home's
`foundry.toml` (`--home`, else `$FOUNDRY_HOME`, else `./.foundry`), else built-in defaults.
`OPENAI_BASE_URL` (with `OPENAI_API_KEY` and `FOUNDRY_MODEL`) points every role without an
endpoint of its own at one server.

Each room keeps the settings of what it does (`data.llm.settings`, `data.export.settings`, …;
the stages' in `data.stage_settings`); `FoundryConfig` assembles them into one file's sections.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, ValidationError, model_validator

from data.costs import BudgetConfig, ModelPrice
from data.documents import IngestConfig
from data.export import ExportConfig
from data.lake import AnswerSpec, ReviewConfig
from data.llm import EndpointConfig, RolesConfig, solver_pointed_at
from data.settings import Settings
from data.stage_settings import (
    CalibrateConfig,
    CodeConfig,
    GenerateConfig,
    RepairConfig,
    ReportsConfig,
    RunnerConfig,
    SandboxConfig,
    ScopeConfig,
    ServeConfig,
    VerifyConfig,
    WorldProtocol,
    WorldsConfig,
)
from data.traces import TracesConfig

__all__ = [
    "DEFAULT_HOME",
    "BudgetConfig",
    "CalibrateConfig",
    "CodeConfig",
    "ConfigError",
    "EndpointConfig",
    "ExportConfig",
    "FoundryConfig",
    "GenerateConfig",
    "IngestConfig",
    "ModelPrice",
    "RepairConfig",
    "ReportsConfig",
    "ReviewConfig",
    "RolesConfig",
    "RunnerConfig",
    "SandboxConfig",
    "ScopeConfig",
    "ServeConfig",
    "Settings",
    "TracesConfig",
    "VerifyConfig",
    "WorldProtocol",
    "WorldsConfig",
    "find_config_file",
    "load_config",
    "extension_settings",
    "with_overrides",
    "with_solver",
]

DEFAULT_HOME = Path(".foundry")
S = TypeVar("S", bound=Settings)


class FoundryConfig(Settings):
    home: Path = DEFAULT_HOME
    batch_size: int = Field(default=64, ge=1)
    embedded_threads: int = Field(default=max(1, os.cpu_count() or 1), ge=1)
    roles: RolesConfig = RolesConfig()
    ingest: IngestConfig = IngestConfig()
    generate: GenerateConfig = GenerateConfig()
    verify: VerifyConfig = VerifyConfig()
    calibrate: CalibrateConfig = CalibrateConfig()
    repair: RepairConfig = RepairConfig()
    sandbox: SandboxConfig = SandboxConfig()
    code: CodeConfig = CodeConfig()
    traces: TracesConfig = TracesConfig()
    worlds: WorldsConfig = WorldsConfig()
    reports: ReportsConfig = ReportsConfig()
    export: ExportConfig = ExportConfig()
    review: ReviewConfig = ReviewConfig()
    budget: BudgetConfig = BudgetConfig()
    # prices by model name, for the roles whose own `price_*_per_mtok` are unset; over the
    # shipped table of hosted models (data/costs/model_prices.toml)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    # what the scheduled (`nightly`) deployment runs the pipeline on: items by source type
    # (`sources.REGISTERED`: docs, repos, traces, worlds), checked against the registry
    sources: dict[str, list[str]] = Field(default_factory=dict)
    scope: ScopeConfig = ScopeConfig()
    runner: RunnerConfig = RunnerConfig()
    serve: ServeConfig = ServeConfig()
    # the settings of a family or source registered outside these sections: `[extensions.<its
    # name>]`, read and checked by the one that declares them (`extension_settings`); a table
    # no registered family or source declares is refused where a run starts
    extensions: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _answer_verifier(self) -> FoundryConfig:
        if self.generate.verifier not in answer_types():
            raise ValueError(
                f"generate.verifier: {self.generate.verifier!r} is not a verifier type that"
                f" compares answers (one of {', '.join(answer_types())})"
            )
        return self


def answer_types() -> list[str]:
    """The verifier types whose spec compares an answer with the gold (`AnswerSpec`'s kinds):
    what `[generate] verifier` may name."""
    return [spec.model_fields["type"].default for spec in AnswerSpec.__subclasses__()]


def extension_settings(config: FoundryConfig, name: str, model: type[S]) -> S:
    """`[extensions.<name>]` as `model` (its defaults where the table is absent); a table
    `model` refuses is a ConfigError naming the setting."""
    try:
        return model.model_validate(config.extensions.get(name, {}))
    except ValidationError as exc:
        raise ConfigError(_describe_invalid(exc, None, f"extensions.{name}")) from None


def with_solver(config: FoundryConfig, model: str, base_url: str | None) -> FoundryConfig:
    """`config` with the solver role pointed at `model` (`data.llm.settings.solver_pointed_at`)."""
    return config.model_copy(update={"roles": solver_pointed_at(config.roles, model, base_url)})


def with_overrides(config: FoundryConfig, overrides: dict[str, Any]) -> FoundryConfig:
    """`config` with the settings in `overrides` (nested like the file) put over it."""

    def merged(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
        out = dict(base)
        for key, value in top.items():
            nested = isinstance(value, dict) and isinstance(out.get(key), dict)
            out[key] = merged(out[key], value) if nested else value
        return out

    return FoundryConfig.model_validate(merged(config.model_dump(), overrides))


class ConfigError(ValueError):
    """The configuration cannot be used; the message is one line naming the setting."""


def find_config_file(explicit: Path | None, home: Path) -> Path | None:
    """The config file to read, following the documented lookup order."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"config file not found: {explicit} (--config)")
        return explicit
    env = os.environ.get("FOUNDRY_CONFIG")
    if env:
        if not Path(env).is_file():
            raise ConfigError(f"FOUNDRY_CONFIG points at a missing file: {env}")
        return Path(env)
    for candidate in (Path("foundry.toml"), home / "foundry.toml"):
        if candidate.is_file():
            return candidate
    return None


def load_config(config_path: Path | None = None, home: Path | None = None) -> FoundryConfig:
    """Read the configuration; `home` (from `--home`) beats `$FOUNDRY_HOME` and the file."""
    env_home = os.environ.get("FOUNDRY_HOME")
    guess_home = home or (Path(env_home) if env_home else DEFAULT_HOME)
    path = find_config_file(config_path, guess_home)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8")) if path else {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    if home is not None or env_home:
        raw["home"] = str(guess_home)
    raw["roles"] = _apply_env_endpoint(raw.get("roles", {}))
    try:
        return FoundryConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe_invalid(exc, path)) from None


def _describe_invalid(exc: ValidationError, path: Path | None, section: str = "") -> str:
    """One line for a configuration pydantic refused: the first bad setting, in TOML terms
    (under `section`, for a table read on its own)."""
    first = exc.errors()[0]
    where = ".".join([section] * bool(section) + [str(part) for part in first["loc"]])
    where = where or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    if path:
        source = str(path)
    else:
        source = "the configuration" if section else "the built-in defaults and environment"
    given = f", got {repr(first['input'])[:80]}" if first["type"] != "extra_forbidden" else ""
    message = "unknown setting" if first["type"] == "extra_forbidden" else first["msg"]
    return f"{source}: {where}: {message}{given}{more}"


def _apply_env_endpoint(roles: dict) -> dict:
    """Fill endpoint-less roles from OPENAI_BASE_URL / OPENAI_API_KEY / FOUNDRY_MODEL."""
    base_url = os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        return roles
    env = {"base_url": base_url}
    if os.environ.get("OPENAI_API_KEY"):
        env["api_key"] = os.environ["OPENAI_API_KEY"]
    if os.environ.get("FOUNDRY_MODEL"):
        env["model"] = os.environ["FOUNDRY_MODEL"]

    def fill(endpoint: dict) -> dict:
        return endpoint if endpoint.get("base_url") else {**env, **endpoint}

    return {
        "generator": fill(roles.get("generator", {})),
        "judges": [fill(j) for j in roles.get("judges", [{}])],
        "solver": fill(roles.get("solver", {})),
    }
