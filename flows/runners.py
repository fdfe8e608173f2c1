"""The task runner a pipeline run uses (`[runner]`): threads of the flow's process, or Dask.

With Dask each batch (a Prefect task) is pickled to a worker process, maybe on another host:
it reads the lake and writes its own shards (never a shared DuckDB file; the catalog is
written by the flow alone), and reaches the models at their configured URLs.
"""

from __future__ import annotations

from prefect.settings import PREFECT_API_URL
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from data.config import RunnerConfig


def task_runner(runner: RunnerConfig) -> TaskRunner:
    """The Prefect task runner `runner` describes."""
    if runner.kind == "threads":
        return ThreadPoolTaskRunner(max_workers=runner.workers)
    from prefect_dask import DaskTaskRunner  # imports Dask (0.25 s and more): only for Dask

    if runner.address:
        return DaskTaskRunner(address=runner.address)
    api = prefect_api_url()
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={
            "n_workers": runner.workers,
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": None,
            "env": {"PREFECT_API_URL": api} if api else {},
        },
    )


def prefect_api_url() -> str | None:
    """The Prefect API this process reports to: the configured server, else the ephemeral
    one it started. Local workers get it, so they report there instead of each starting an
    ephemeral server of its own."""
    configured = PREFECT_API_URL.value()
    if configured:
        return configured
    from prefect.server.api.server import SubprocessASGIServer  # the server code: only here

    ephemeral = SubprocessASGIServer()
    return ephemeral.api_url if ephemeral.running else None
