"""Configuration: `foundry.toml` into typed settings, with the embedded default when silent.

Lookup order: `--config`, else `$FOUNDRY_CONFIG`, else `./foundry.toml`, else the home's
`foundry.toml` (`--home`, else `$FOUNDRY_HOME`, else `./.foundry`), else built-in defaults.
`OPENAI_BASE_URL` (with `OPENAI_API_KEY` and `FOUNDRY_MODEL`) points every role without an
endpoint of its own at one server.
"""

from __future__ import annotations

import os
import re
import tomllib
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from data.splits import DEFAULT_EVAL_SHARE

if TYPE_CHECKING:
    from data.dataset_card import Licensing

DEFAULT_HOME = Path(".foundry")
WorldProtocol = Literal["auto", "tools", "actions"]


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EndpointConfig(Settings):
    """One OpenAI-compatible endpoint for one role. No `base_url` means the embedded model."""

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    max_concurrency: int = Field(default=8, ge=1)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    # What the server accepts; None: asked of it once per run (data.model_servers). json_schema
    # false sends {"type": "json_object", "schema": ...} (llama.cpp's server) instead.
    json_schema: bool | None = None
    supports_n: bool | None = None
    tool_calls: bool | None = None  # whether it returns native tool calls (OpenAI tools API)
    # Sampling for requests whose stage sets none (the judges): a panel can be one model asked
    # with different seeds at a temperature above 0.
    temperature: float = Field(default=0.0, ge=0)
    seed: int | None = None
    # USD per million tokens; unset (or both 0): `[prices]`, the shipped table or free when
    # local, else unknown (data/prices.py)
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)


class RolesConfig(Settings):
    generator: EndpointConfig = EndpointConfig()
    judges: list[EndpointConfig] = Field(default_factory=lambda: [EndpointConfig()], min_length=1)
    solver: EndpointConfig = EndpointConfig()


class IngestConfig(Settings):
    chunk_chars: int = Field(default=900, ge=200)
    min_chunk_chars: int = Field(default=80, ge=1)
    max_file_bytes: int = Field(default=20_000_000, ge=1)
    near_duplicate_threshold: float = Field(default=0.95, gt=0, le=1)
    # a PDF, Office, e-book, notebook or markup file is converted in a child process with these
    # limits (data/conversion.py): past them it is refused with the reason, the run goes on
    convert_timeout_s: float = Field(default=60.0, gt=0)
    convert_memory_mb: int = Field(default=2048, ge=256)


class GenerateConfig(Settings):
    # chunks generated from, in all: every run's count, lowest chunk id first (None: every one)
    max_chunks: int | None = Field(default=None, ge=1)
    candidates_per_chunk: int = Field(default=2, ge=1)
    question_style: Literal["auto", "question", "cloze"] = "auto"
    # where a document task starts on its ladder (generators/doc_qa.py): the evidence sentence or
    # its passage in the prompt (open book), or `base` (the solver searches the corpus)
    level: Literal["evidence", "passage", "base"] = "base"
    verifier: Literal["exact_or_f1", "llm_equivalence"] = "exact_or_f1"
    max_answer_words: int = Field(default=8, ge=1)
    max_question_chars: int = Field(default=300, ge=20)
    temperature: float = 0.0


class VerifyConfig(Settings):
    consensus: Literal["majority", "unanimous", "quorum"] = Field(
        default="majority", description="how the panel's open-book verdicts combine"
    )
    quorum: int = Field(default=2, ge=1, description="k of the k-of-n quorum rule")
    # control items per kind each judge answers before verification (judges/controls.py), and
    # the accuracy below which a judge is reported as unable to do the job (0 items: none)
    control_items: int = Field(default=4, ge=0)
    control_accuracy: float = Field(default=0.6, ge=0, le=1)


class CalibrateConfig(Settings):
    # where document tasks at the search levels are attempted: doc_search (search/read tools over
    # the corpus), or closed_book (opt-in: the question alone, for closed-book training)
    harness: Literal["closed_book", "doc_search"] = "doc_search"
    max_turns: int = Field(default=4, ge=1)  # doc_search: tool turns before the attempt ends
    # adaptive: attempts in rounds until the band is settled (judges/adaptive.py); fixed: k each
    method: Literal["adaptive", "fixed"] = "adaptive"
    k: int = Field(default=8, ge=1)
    reference_k: int = Field(default=16, ge=1)  # adaptive: as accurate as this many fixed
    round_size: int = Field(default=2, ge=1)
    max_attempts: int = Field(default=32, ge=1)
    indifference: float = Field(default=0.05, ge=0, lt=0.5)  # either label is right this close
    # task: each task's prior from the earlier tasks like it (judges/task_prior.py); pooled: one
    # prior per environment; either needs `prior_min_tasks` earlier tasks, else Jeffreys'
    prior: Literal["task", "pooled"] = "task"
    prior_min_tasks: int = Field(default=50, ge=1)
    band_low: float = Field(default=0.2, ge=0, le=1)
    band_high: float = Field(default=0.8, ge=0, le=1)
    confidence: float = Field(default=0.9, gt=0, lt=1)
    temperature: float = Field(default=0.8, ge=0)
    max_tokens: int = Field(default=48, ge=1)

    @model_validator(mode="after")
    def _consistent(self) -> CalibrateConfig:
        if self.band_low > self.band_high:
            raise ValueError(f"band_low {self.band_low} > band_high {self.band_high}")
        if self.max_attempts < self.round_size:
            raise ValueError(f"max_attempts {self.max_attempts} < round_size {self.round_size}")
        return self


class RepairConfig(Settings):
    # moves along the generator's difficulty ladder per original task (0 turns repair off)
    max_steps: int = Field(default=2, ge=0)
    neighbours: int = Field(default=5, ge=1)  # chunks by embedding a two-hop question may use


class SandboxConfig(Settings):
    """Limits for code from ingested repositories (data/runtime/sandbox.py), per command."""

    wall_s: float = Field(default=300.0, gt=0)
    memory_mb: int = Field(default=2048, ge=64)
    processes: int = Field(default=64, ge=4)
    file_mb: int = Field(default=512, ge=1)
    parallel: int | None = Field(default=None, ge=1)  # sandboxes at once (default: cores / 2)


class CodeConfig(Settings):
    """Code tasks from ingested repositories (commit replay, function rebuild, bug fix)."""

    max_prompt_chars: int = Field(default=24_000, ge=1000)  # the files a prompt shows, in all
    statement_max_tokens: int = Field(default=400, ge=50)  # a commit-replay statement
    max_functions: int = Field(default=24, ge=0)  # function-rebuild candidates per repository
    max_bugs: int = Field(default=12, ge=0)  # functions given a bug to fix, per repository
    # commits replayed (and so described), in all: every run's count, replayable and newest
    # first, the repositories in turn (families/commit_choice.py); None: every commit
    max_replays: int | None = Field(default=None, ge=0)
    sequence_steps: int = Field(default=2, ge=0)  # commits per commit-sequence task (< 2: off)
    attempt_max_tokens: int = Field(default=2048, ge=64)  # a solver's reply to a code task


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


class WorldsConfig(Settings):
    """Simulated tool worlds (harnesses/world.py) and the planted tasks made on them."""

    tasks_per_world: int = Field(default=6, ge=1)  # planted tasks per world, at the base level
    max_turns: int = Field(default=8, ge=1)  # a solver's model calls per attempt
    attempt_max_tokens: int = Field(default=256, ge=16)  # per turn of a solver's attempt
    # how the solver calls the world's tools (harnesses/world_agent.py): native tool calls, one
    # JSON action per turn, or `auto`: native where the solver's server returns tool calls
    protocol: WorldProtocol = "auto"
    # worlds built from traces: a world is kept when replaying the traces' calls on it gives
    # results of the recorded shapes at least this often (judges/world_fidelity.py)
    min_fidelity: float = Field(default=0.7, ge=0, le=1)
    refine_rounds: int = Field(default=2, ge=0)  # the generator's rewrites, told the mismatches


class ReportsConfig(Settings):
    """Long-form report tasks from documents (generators/doc_report.py): a request whose answer
    is a short report drawing on several passages of one document, graded fact by fact."""

    max_reports: int = Field(default=0, ge=0)  # documents made report tasks of, in all (0: none)
    passages: int = Field(default=2, ge=2)  # neighbouring passages a report draws on
    facts_per_passage: int = Field(default=2, ge=1)  # checkable facts taken from each
    max_request_chars: int = Field(default=400, ge=40)
    attempt_max_tokens: int = Field(default=320, ge=32)  # a solver's report


class ServeConfig(Settings):
    """`foundry serve`: the deployments it registers and serves."""

    cron: str = "0 3 * * *"  # the nightly run, in the server's time zone
    # `foundry serve --pool`: the work pool of the `train` deployment (a GPU host's); default
    # the same pool as the others
    train_pool: str | None = None
    # a scheduled run's new taskset version waits for approval in the Prefect UI before it
    # becomes `latest` (flows/publish_gate.py); unanswered this long, the run fails
    publish_gate: bool = False
    publish_timeout_h: float = Field(default=24.0, gt=0)


class ModelPrice(Settings):
    """What a model costs, USD per million tokens (`[prices."<model>"]`)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class ReviewConfig(Settings):
    """Curation by people (`foundry curate`, data/curation.py): rejected and edited-away tasks
    are never exported; with `required`, only the tasks a person accepted (or edited) are."""

    required: bool = False


class BudgetConfig(Settings):
    """A run's LLM budget (data/budget.py): live tokens and cost at the models' prices
    (data/prices.py). When one is reached the run finishes what is in flight, exports, and
    leaves the rest pending. A cost limit is refused where a model the run calls has no price."""

    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)


class RunnerConfig(Settings):
    """Where a pipeline run's Prefect tasks (batches of items) run: in threads of the flow's
    process, or on a Dask cluster (prefect-dask): a local one of `workers` processes, or the
    scheduler at `address`. Up to `workers` batches of a stage run at once."""

    kind: Literal["threads", "dask"] = "threads"
    workers: int = Field(default=1, ge=1)
    address: str | None = None  # dask: an existing scheduler, e.g. "tcp://10.0.0.5:8786"
    # where the solver's recording proxy listens, beside the flow: an address of the flow's
    # host that workers on other hosts reach
    proxy_host: str = "127.0.0.1"


class ScopeConfig(Settings):
    """What a run makes tasks of: the task kinds (default every kind) and the days of the
    commits and traces they come from (`since` and `until` inclusive, UTC; default all time).
    Documents have no date; an undated trace is outside any window. Verify, calibrate, review
    and repair take only tasks of the chosen kinds. The three trace kinds come from one rating
    of each trace, so naming one of them rates the traces in the window, and the tasks of
    unnamed trace kinds this makes wait, unverified, for a run that names them. A kind is
    checked against the registered families where a run starts (`flows.stages.check_kinds`)."""

    kinds: list[str] | None = None
    since: date | None = None
    until: date | None = None

    @model_validator(mode="after")
    def _ordered(self) -> ScopeConfig:
        if self.since and self.until and self.since > self.until:
            raise ValueError(f"scope: since {self.since} is after until {self.until}")
        return self

    def makes(self, *kinds: str) -> bool:
        """Whether any of `kinds` is in scope."""
        return self.kinds is None or any(kind in self.kinds for kind in kinds)

    def covers(self, moment: datetime | str | None) -> bool:
        """Whether `moment` (a datetime or ISO 8601 text; naive means UTC) is in the window."""
        if self.since is None and self.until is None:
            return True
        if moment is None or moment == "":
            return False
        when = datetime.fromisoformat(moment) if isinstance(moment, str) else moment
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        start = datetime.combine(self.since, time(), UTC) if self.since else None
        end = datetime.combine(self.until + timedelta(days=1), time(), UTC) if self.until else None
        return (start is None or when >= start) and (end is None or when < end)


class ExportConfig(Settings):
    name: str = "docqa"
    rows_per_part: int = Field(default=50_000, ge=1)
    # trainer projections written with each export (`data.projections.REGISTERED`)
    formats: list[str] = Field(default_factory=list)
    # of the groups of related tasks, the share drawn to the eval split (data/splits.py); a
    # group keeps the side it was first drawn to, whatever this says later
    eval_share: float = Field(default=DEFAULT_EVAL_SHARE, ge=0, le=1)
    # a taskset of fewer tasks comes with its explanation (data/diagnosis.py): where the
    # material was lost and what would most likely change it
    explain_below: int = Field(default=10, ge=0)
    # the licence the card declares for the taskset: a Hub licence id (`unknown` until a person
    # states one; `other` with `license_name` and `license_link`)
    license: str = "unknown"
    license_name: str = ""
    license_link: str = ""
    # each source's licence, by its root as the card lists it: a document folder's name, a
    # trace or world file's name, a repository's origin (`data.public_names.source_root`)
    source_licenses: dict[str, str] = Field(default_factory=dict)
    # where each new version is published whole (`data.publish`): an fsspec URL or a folder,
    # `hf://datasets/OWNER/NAME` for the Hub; empty: not published
    publish_to: str = ""

    @field_validator("license")
    @classmethod
    def _hub_license(cls, license: str) -> str:
        from data.dataset_card import HUB_LICENSES  # the card's module reads these settings

        if license not in HUB_LICENSES:
            raise ValueError(
                f"{license!r} is not a Hub licence id; use one of"
                " https://huggingface.co/docs/hub/repositories-licenses, or `other` with"
                " license_name and license_link"
            )
        return license

    @model_validator(mode="after")
    def _other_license_named(self) -> ExportConfig:
        if self.license == "other" and not (self.license_name and self.license_link):
            raise ValueError("license = 'other' needs license_name and license_link")
        return self

    def licensing(self) -> Licensing:
        """What the card declares of the licences."""
        from data.dataset_card import Licensing

        return Licensing(
            self.license, self.license_name, self.license_link, dict(self.source_licenses)
        )

    @field_validator("formats")
    @classmethod
    def _registered(cls, formats: list[str]) -> list[str]:
        from data.projections import formats as registered  # it reads this module's settings

        unknown = [f for f in formats if f not in registered()]
        if unknown:
            raise ValueError(
                f"unknown format {unknown[0]!r}; choose from {', '.join(registered())}"
            )
        return formats


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
    # shipped table of hosted models (data/model_prices.toml)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    # what the scheduled (`nightly`) deployment runs the pipeline on: items by source type
    # (`sources.REGISTERED`: docs, repos, traces, worlds), checked against the registry
    sources: dict[str, list[str]] = Field(default_factory=dict)
    scope: ScopeConfig = ScopeConfig()
    runner: RunnerConfig = RunnerConfig()
    serve: ServeConfig = ServeConfig()


def with_solver(config: FoundryConfig, model: str, base_url: str | None) -> FoundryConfig:
    """`config` with the solver role pointed at `model` (on `base_url`, else on the configured
    solver's server, which must not be the embedded one: it serves a single model)."""
    current = config.roles.solver
    url = base_url or current.base_url
    if url is None:
        raise ValueError(
            f"the embedded server only serves its own model; give --solver-url for {model}"
        )
    solver = current.model_copy(update={"model": model, "base_url": url})
    return config.model_copy(update={"roles": config.roles.model_copy(update={"solver": solver})})


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


def _describe_invalid(exc: ValidationError, path: Path | None) -> str:
    """One line for a configuration pydantic refused: the first bad setting, in TOML terms."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    source = str(path) if path else "the built-in defaults and environment"
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
