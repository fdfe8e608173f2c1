"""Shared fixtures: an isolated FOUNDRY home, stage contexts and the oracle-backed fake server."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from data.config import FoundryConfig
from data.lake import Lake
from flows.context import StageContext
from flows.stages import LLM_STAGES, run_llm_batch, run_stages, solver_through_proxy
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import fake_endpoints

SAMPLE_DOCS = Path(__file__).resolve().parent.parent / "data" / "samples" / "docs"


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


def make_context(home: Path, run_id: str = "run-1", **settings) -> StageContext:
    config = FoundryConfig(home=home, **settings)
    return StageContext(lake=Lake(home), config=config, run_id=run_id)


def run_llm_stages(ctx: StageContext, endpoints) -> Counter:
    """Every LLM stage over whatever is pending, batch by batch (what the flows do)."""
    with solver_through_proxy(ctx, endpoints) as proxied:
        summary = run_stages(
            LLM_STAGES, ctx, lambda stage, _, group: run_llm_batch(stage, group, ctx, proxied)
        )
    return sum(summary.values(), Counter())


def endpoints_for(server: FakeOpenAIServer, **overrides):
    return fake_endpoints(server.base_url, model="fake-model", **overrides)
