"""Shared fixtures: an isolated FOUNDRY home, stage contexts and the oracle-backed fake server."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from data.config import FoundryConfig
from data.export import export_taskset, formats, project, read_tasks
from data.lake import Lake, Task
from data.runtime.python_env import ENV_CACHE_VARIABLE
from families import export_kinds
from families.code import checkouts
from families.stage import LLMStage, StageContext
from flows.stage_runs import one_at_a_time, run_llm_batch, run_stages, solver_through_proxy
from flows.stages import llm_stages
from generators.function_rebuild import RepoAtHead
from judges.verifier_types import package_graders
from sources import groupings
from sources.documents import ingest_docs
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import fake_endpoints

SESSION_ENV_CACHE = pytest.StashKey[str]()
SAMPLE_DOCS = Path(__file__).resolve().parent.parent / "data" / "samples" / "docs"
# a small `foundry run` for the tests that run it whole: four chunks, one repair step, two
# fixed attempts per task
SMALL_RUN_CONFIG = """
[generate]
max_chunks = 4
[repair]
max_steps = 1
[calibrate]
k = 2
method = "fixed"
"""


def run_outcome(home: Path) -> tuple[list[str], list[str]]:
    """After a whole `foundry run`: the task ids in the lake and those of the latest `docqa`
    taskset version, each sorted (a duplicate would show)."""
    lake = Lake(home)
    tasks = [r["task_id"] for r in lake.rows("SELECT task_id FROM tasks ORDER BY task_id")]
    latest = home / "tasksets" / "docqa" / "latest"
    exported = read_tasks(latest).column("task_id").to_pylist()
    return tasks, sorted(exported)


def pytest_configure(config: pytest.Config) -> None:
    """The repositories' environments of this test session are built in a folder of its own
    (every sandbox uid can read it), which its workers share and which goes with it: no test
    reads what an earlier session built."""
    if ENV_CACHE_VARIABLE not in os.environ and "PYTEST_XDIST_WORKER" not in os.environ:
        folder = tempfile.mkdtemp(prefix="foundry-test-envs-")
        os.chmod(folder, 0o755)
        os.environ[ENV_CACHE_VARIABLE] = folder
        config.stash[SESSION_ENV_CACHE] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(SESSION_ENV_CACHE, None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch, tmp_path_factory):
    """No test sees the developer's endpoint, config or Prefect home."""
    for name in (
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "FOUNDRY_MODEL",
        "FOUNDRY_CONFIG",
        "FOUNDRY_HOME",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path_factory.mktemp("prefect")))
    monkeypatch.setenv("DO_NOT_TRACK", "1")
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def oracle_server():
    with FakeOpenAIServer(Oracle()) as server:
        yield server


@pytest.fixture
def open_dir():
    """A folder an unprivileged user can enter (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="foundry-unprivileged-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def make_context(home: Path, run_id: str = "run-1", **settings) -> StageContext:
    config = FoundryConfig(home=home, **settings)
    return StageContext(lake=Lake(home), config=config, run_id=run_id)


def run_llm_stages(ctx: StageContext, endpoints, stages: list[LLMStage] | None = None) -> Counter:
    """Every LLM stage (or those of `stages`) over whatever is pending, batch by batch (what
    the flows do)."""
    with solver_through_proxy(ctx, endpoints) as proxied:
        run_batch = lambda stage, _, group: run_llm_batch(stage, group, ctx, proxied)  # noqa: E731
        summary = run_stages(stages or llm_stages(), ctx, one_at_a_time(ctx, run_batch))
    return sum(summary.values(), Counter())


def endpoints_for(server: FakeOpenAIServer, **overrides):
    return fake_endpoints(server.base_url, model="fake-model", **overrides)


@pytest.fixture(scope="session")
def docqa_taskset(tmp_path_factory):
    """A doc-QA taskset from three sample documents with the oracle as every model (two
    judges), exported with every trainer projection: (context, version folder, projections by
    format)."""
    root = tmp_path_factory.mktemp("projections")
    ctx = make_context(root / "home", generate={"max_chunks": 8}, calibrate={"k": 4})
    docs = sorted(SAMPLE_DOCS.glob("*.md"))[:3]
    ingest_docs([str(d) for d in docs], ctx)
    with FakeOpenAIServer(Oracle()) as server:
        run_llm_stages(ctx, endpoints_for(server, judges=2))
    version = export_taskset(
        ctx.lake, "docqa", root / "tasksets", kinds=export_kinds(), groupings=groupings()
    ).path
    projections = {
        fmt: project(version, fmt, ctx.lake, graders=package_graders()) for fmt in formats()
    }
    return ctx, version, projections


@pytest.fixture(scope="session")
def agentic_taskset(tmp_path_factory):
    """A taskset of tasks with tools, the oracle as every model: doc-QA tasks calibrated in the
    doc-search environment (three sample documents) and world tasks on the bundled worlds,
    exported with its `trl` projection: (context, version folder)."""
    from sources.worlds import ingest_world_files

    root = tmp_path_factory.mktemp("agentic")
    ctx = make_context(
        root / "home",
        generate={"max_chunks": 3},
        calibrate={"harness": "doc_search", "method": "fixed", "k": 2, "max_turns": 3},
        worlds={"tasks_per_world": 1},
        repair={"max_steps": 0},
    )
    ingest_docs([str(d) for d in sorted(SAMPLE_DOCS.glob("*.md"))[:3]], ctx)
    ingest_world_files([str(SAMPLE_DOCS.parent / "worlds")], ctx)
    with FakeOpenAIServer(Oracle()) as server:
        run_llm_stages(ctx, endpoints_for(server))
    turns = ctx.config.calibrate.max_turns
    tasksets = root / "tasksets"
    version = export_taskset(
        ctx.lake,
        "agentic",
        tasksets,
        kinds=export_kinds(),
        groupings=groupings(),
        search_turns=turns,
    ).path
    project(version, "trl", ctx.lake, graders=package_graders())
    return ctx, version


def latest_artifacts(keys: list[str]) -> dict:
    """The latest Prefect artifact of each of `keys`, read back through the Prefect API the
    `foundry` commands of this process reported to."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.prefect_server import prefect_api

    with prefect_api(), get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys))
        )
    return {artifact.key: artifact for artifact in sorted(found, key=lambda a: a.created)}


def repo_of(lake: Lake, task: Task) -> RepoAtHead:
    """The repository of a code task, at the revision the task is built on."""
    return checkouts(lake, [task])[task.task_id].repo()
