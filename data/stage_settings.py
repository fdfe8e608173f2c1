"""Settings of the pipeline's stages and flows: generation, verification, calibration, repair,
the sandbox, code, worlds and report tasks, what a run makes tasks of, where its work runs and
what `foundry serve` registers. Each room's own settings live in the room (`data.llm.settings`,
`data.export.settings`, …); `data.config` assembles them all."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from pydantic import Field, model_validator

from data.settings import Settings

WorldProtocol = Literal["auto", "tools", "actions"]


class GenerateConfig(Settings):
    # chunks generated from, in all: every run's count, lowest chunk id first (None: every one)
    max_chunks: int | None = Field(default=None, ge=1)
    candidates_per_chunk: int = Field(default=2, ge=1)
    question_style: Literal["auto", "question", "cloze"] = "auto"
    # where a document task starts on its ladder (generators/doc_qa.py): the evidence sentence or
    # its passage in the prompt (open book), or `base` (the solver searches the corpus)
    level: Literal["evidence", "passage", "base"] = "base"
    # the verifier type of a document question: one whose spec compares answers (an
    # `AnswerSpec`'s, `data.lake`), which `data.config` checks the name against
    verifier: str = "exact_or_f1"
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
