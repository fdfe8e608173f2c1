"""The deployments `foundry serve` registers and serves against a Prefect server.

- `nightly`: the whole pipeline on the configured `[sources]`, on the `[serve] cron` schedule;
- `adhoc`: a backfill as one form in the UI ("Custom run"): sources (a list per registered
  source type), task kinds, the days of the commits and traces, limits, band, models and budget
  as typed parameters over the configuration;
- `train`: `foundry train` on a taskset, on its own work pool (`[serve] train_pool`: a GPU
  host's) when deployed to pools;
- `loop`: `foundry loop`, its training step run by the `train` deployment.

`foundry serve` runs until stopped; each flow run it picks up runs in a subprocess of it.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any, Literal

from prefect import Flow, flow, serve
from prefect.artifacts import create_markdown_artifact
from prefect.deployments.runner import RunnerDeployment
from pydantic import Field, create_model

from data.config import FoundryConfig, load_config, with_overrides
from data.plan import format_plan
from families import kinds as registered_kinds
from flows.loop import loop_flow
from flows.pipeline import pipeline_flow, run_pipeline
from flows.run_plan import estimate_run
from flows.train import train_flow
from sources import REGISTERED as SOURCES
from sources import check_sources

RegisteredKind = Literal[tuple(registered_kinds())]  # the form offers each one to tick


# the adhoc form's sources: a list of items for each registered source type
SourceLists = create_model(
    "SourceLists",
    **{s.name: (list[str], Field(default_factory=list, description=s.items)) for s in SOURCES},
)


@flow(name="adhoc")
def adhoc_flow(
    sources: SourceLists | None = None,  # type: ignore[valid-type]
    kinds: tuple[RegisteredKind, ...] = (),
    since: date | None = None,
    until: date | None = None,
    max_chunks: int | None = None,
    max_replays: int | None = None,
    max_functions: int | None = None,
    max_bugs: int | None = None,
    max_traces: int | None = None,
    band_low: float = 0.0,
    band_high: float = 1.0,
    generator_model: str | None = None,
    solver_model: str | None = None,
    max_tokens: int | None = None,
    max_cost_usd: float | None = None,
    home: str | None = None,
    config: str | None = None,
    plan_only: bool = False,
) -> dict[str, Any]:
    """A backfill: ingest what is given, run every stage over what is pending, export. A
    field left empty keeps the configuration's setting (docs/deployment.md).

    Args:
        sources: what to ingest, a list of items for each registered source type, each field
            saying what it takes; documents are files or folders in any format the readers
            take: Markdown, plain text, HTML, PDF, Word, PowerPoint, Excel, CSV, EPUB, Jupyter
            notebooks, reStructuredText and AsciiDoc
        kinds: make only these task kinds (none ticked: `[scope] kinds`, by default every kind)
        since: only commits authored and traces recorded on or after this day (UTC)
        until: only commits authored and traces recorded on or before this day (UTC)
        max_chunks: generate from at most this many chunks of the lake, done ones included
            (`[generate]`)
        max_replays: replay (and so describe) at most this many commits, in all (`[code]`)
        max_functions: function-rebuild candidates per repository (`[code]`)
        max_bugs: functions given a bug to fix, per repository (`[code]`)
        max_traces: turn at most this many traces into tasks, in all (`[traces]`)
        band_low: export only tasks with a pass rate of at least this
        band_high: export only tasks with a pass rate of at most this
        generator_model: the generator role's model, on its configured server (ignored where
            the role is on the embedded model)
        solver_model: the solver role's model, on its configured server (ignored where
            the role is on the embedded model)
        max_tokens: stop at this many live LLM tokens (`[budget]`)
        max_cost_usd: stop at this LLM cost (`[budget]`)
        home: the foundry home (default: the server's)
        config: a foundry.toml to use (default: the one `foundry serve` was given, else the
            usual lookup)
        plan_only: only estimate the run's calls, tokens and cost per stage, with their
            range (the `foundry-plan` artifact), as `foundry run --plan` does: no model is
            called
    """
    overrides: dict[str, Any] = {}
    limits = {
        ("generate", "max_chunks"): max_chunks,
        ("code", "max_replays"): max_replays,
        ("code", "max_functions"): max_functions,
        ("code", "max_bugs"): max_bugs,
        ("traces", "max_traces"): max_traces,
        ("roles", "generator"): {"model": generator_model} if generator_model else None,
        ("roles", "solver"): {"model": solver_model} if solver_model else None,
        ("scope", "kinds"): list(kinds) or None,  # none ticked in the form: every kind
        ("scope", "since"): since,
        ("scope", "until"): until,
    }
    for (section, key), value in limits.items():
        if value is not None:
            overrides.setdefault(section, {})[key] = value
    if plan_only:
        return publish_plan(sources.model_dump() if sources else {}, home, config, overrides)
    band = None if (band_low, band_high) == (0.0, 1.0) else (band_low, band_high)
    return run_pipeline(
        sources=sources.model_dump() if sources else None,
        home=home,
        config=config,
        out=None,
        band=band,
        max_tokens=max_tokens,
        max_cost_usd=max_cost_usd,
        overrides=overrides or None,
    )


def publish_plan(
    sources: dict[str, list[str]], home: str | None, config: str | None, overrides: dict[str, Any]
) -> dict[str, Any]:
    """The estimate of a run on `sources` (`flows.run_plan`), as the `foundry-plan` artifact
    and the flow's result."""
    cfg = load_config(Path(config) if config else None, Path(home) if home else None)
    estimate = estimate_run(sources, with_overrides(cfg, overrides) if overrides else cfg)
    create_markdown_artifact(
        f"```\n{format_plan(estimate)}\n```\n",
        key="foundry-plan",
        description="The run's estimated calls, tokens and cost per stage, before any call",
    )
    return {"plan": estimate.to_json()}


CHECKOUT = Path(__file__).resolve().parent.parent  # where work-pool workers load the flows


def specs(cfg: FoundryConfig, config: str | None) -> list[tuple[Flow, str, dict[str, Any]]]:
    """Each deployment's flow, entrypoint and settings: `nightly` (the pipeline on
    `cfg.sources`, on `cfg.serve.cron`), `adhoc`, `train` and `loop`."""
    check_sources(cfg.sources)
    common = {
        "home": str(cfg.home.resolve()),
        "config": str(Path(config).resolve()) if config else None,
    }
    nightly = {
        "name": "nightly",
        "cron": cfg.serve.cron,
        "parameters": {"sources": cfg.sources, **common},
        "description": "The whole pipeline on the configured sources, on a schedule",
    }
    adhoc = {
        "name": "adhoc",
        "parameters": common,
        "description": "A backfill: sources, kinds, days, limits, band, models, budget as a form",
    }
    train = {
        "name": "train",
        "parameters": common,
        "description": "GRPO on a taskset's train split with its own rewards (foundry train)",
    }
    loop = {
        "name": "loop",
        "parameters": {
            "trainer": "deployment",
            "train_deployment": f"{train_flow.name}/{train['name']}",
            **common,
        },
        "description": "Rounds of export, train (the train deployment), held-out evaluation"
        " and steering by the new policy's failures (foundry loop)",
    }
    return [
        (pipeline_flow, "flows/pipeline.py:pipeline_flow", nightly),
        (adhoc_flow, "flows/deployments.py:adhoc_flow", adhoc),
        (train_flow, "flows/train.py:train_flow", train),
        (loop_flow, "flows/loop.py:loop_flow", loop),
    ]


def deployments(cfg: FoundryConfig, config: str | None) -> list[RunnerDeployment]:
    """The deployments `foundry serve` serves."""
    return [made.to_deployment(**settings) for made, _, settings in specs(cfg, config)]


def serve_deployments(cfg: FoundryConfig, config: str | None) -> None:
    """Register the deployments with the Prefect server and run their flow runs until
    stopped."""
    serve(*deployments(cfg, config))


def deploy_to_pool(cfg: FoundryConfig, config: str | None, pool: str) -> list[str]:
    """Register the deployments for the work pool `pool` (`train` for `[serve] train_pool`
    where set), their flows loaded from this checkout: every host whose worker serves the pool
    runs them from the same path (shared storage). Returns the deployments' names and
    pools."""
    names = []
    for made, entrypoint, settings in specs(cfg, config):
        remote = made.from_source(source=str(CHECKOUT), entrypoint=entrypoint)
        own = cfg.serve.train_pool if made is train_flow and cfg.serve.train_pool else pool
        remote.deploy(
            work_pool_name=own, build=False, push=False, print_next_steps=False, **settings
        )
        names.append(f"{made.name}/{settings['name']} (work pool {own})")
    return names
