"""Integration with the real embedded model (SmolLM2-135M via llama-cpp-python).

Structure only, never content: the model is tiny and its words are not the point here.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from data.config import FoundryConfig
from data.llm import (
    EMBEDDED_MODEL_ALIAS,
    LLMClient,
    embedded_server,
    locate_gguf,
    resolve_endpoints,
)
from sources.documents import ingest_docs
from tests.conftest import SAMPLE_DOCS, make_context, run_llm_stages
from tests.fakes.fault_proxy import FaultProxy

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.embedded


def server_pids(port: int | None) -> list[int]:
    """PIDs of llama_cpp.server processes on `port` or, with None, of those this test process
    started on any port (from /proc): servers others run on the machine are not counted."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            ours = port is not None or _parent_pid(entry) == os.getpid()
        except OSError:
            continue
        on_port = port is None or str(port).encode() in cmdline
        if ours and on_port and b"llama_cpp.server" in cmdline:
            pids.append(int(entry.name))
    return pids


def _parent_pid(proc: Path) -> int:
    for line in (proc / "status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return 0


def port_of(base_url: str) -> int:
    return int(base_url.rsplit(":", 1)[1].split("/")[0])


def wait_gone(port: int, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not server_pids(port):
            return True
        time.sleep(0.2)
    return False


class Choice(BaseModel):
    answer: Literal["red", "green", "blue"]


def test_model_file_ships_inside_the_package():
    path = locate_gguf()
    assert path.suffix == ".gguf" and path.stat().st_size > 10_000_000


def test_server_answers_chat_and_structured_output_then_stops():
    with embedded_server(n_threads=2) as base_url:
        port = port_of(base_url)
        assert server_pids(port)
        with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
            assert json.load(response)["data"][0]["id"] == EMBEDDED_MODEL_ALIAS

        external = {"base_url": base_url}
        config = FoundryConfig(
            roles={"generator": external, "judges": [external], "solver": external}
        )
        with resolve_endpoints(config, Path("/tmp")) as endpoints:
            assert server_pids(None) == server_pids(port)  # no second server was started

        async def ask():
            from data.llm import Endpoint

            endpoint = Endpoint(
                role="generator",
                base_url=base_url,
                api_key="x",
                model=EMBEDDED_MODEL_ALIAS,
                max_concurrency=1,
                timeout_s=120,
                max_retries=1,
                structured_output="json_object_schema",
                supports_n=False,
            )
            client = LLMClient({"generator": endpoint}, cache=None)
            try:
                reply = await client.chat(
                    "generator", [{"role": "user", "content": "Hello"}], max_tokens=16
                )
                choice = await client.structured(
                    "generator",
                    [{"role": "user", "content": 'Pick a colour. JSON: {"answer": ...}'}],
                    Choice,
                    max_tokens=32,
                )
            finally:
                await client.aclose()
            return reply, choice, client.drain_calls()

        reply, choice, calls = asyncio.run(ask())
        assert reply.text.strip() and reply.usage.completion_tokens > 0
        assert choice.answer in ("red", "green", "blue")
        assert all(c.ok and c.model == EMBEDDED_MODEL_ALIAS for c in calls)
        assert endpoints["generator"].base_url == base_url
    assert wait_gone(port)


def models_listed(base_url: str, seconds: float) -> bool:
    """Whether the server at `base_url` lists a model within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                if json.load(response)["data"]:
                    return True
        except OSError:
            time.sleep(0.25)
    return False


def test_a_server_killed_mid_run_is_started_again_on_its_port(tmp_path):
    log = tmp_path / "embedded.log"
    with embedded_server(n_threads=1, log_path=log) as base_url:
        port = port_of(base_url)
        (first,) = server_pids(port)
        os.kill(first, signal.SIGKILL)
        # the kill lands asynchronously: only once the old process is gone can an answer on
        # the port come from its successor
        deadline = time.monotonic() + 15
        while first in server_pids(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert first not in server_pids(port)
        assert models_listed(base_url, seconds=120)
        (second,) = server_pids(port)
        assert second != first
    assert wait_gone(port)


def test_interrupt_stops_the_server():
    with pytest.raises(KeyboardInterrupt), embedded_server(n_threads=1) as base_url:
        port = port_of(base_url)
        raise KeyboardInterrupt
    assert wait_gone(port)


def test_server_dies_with_a_killed_parent(tmp_path):
    script = (
        "import sys, time\n"
        "from data.llm.embedded import embedded_server\n"
        "with embedded_server(n_threads=1) as url:\n"
        "    print(url, flush=True)\n"
        "    time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        port = port_of(parent.stdout.readline().strip())
        assert server_pids(port)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert wait_gone(port), "the server outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.full
def test_tiny_pipeline_on_the_embedded_model(tmp_path):
    ctx = make_context(tmp_path / "home", calibrate={"method": "fixed", "k": 2}, embedded_threads=2)
    ingest_docs([str(SAMPLE_DOCS / "lumetra-x2-kettle.md")], ctx)
    with resolve_endpoints(ctx.config, tmp_path / "logs") as endpoints:
        counts = run_llm_stages(ctx, endpoints)
    chunks = ctx.lake.rows("SELECT count(*) AS n FROM chunks")[0]["n"]
    statuses = ctx.lake.rows("SELECT stage, status, reason FROM status WHERE stage = 'generate'")
    assert len(statuses) == chunks and all(s["reason"] for s in statuses)
    assert sum(counts.values()) >= chunks
    calls = ctx.lake.rows("SELECT DISTINCT model FROM llm_calls")
    assert calls == [{"model": EMBEDDED_MODEL_ALIAS}]
    for row in ctx.lake.rows("SELECT n, pass_rate, band FROM difficulty"):
        assert row["n"] == 2 and 0 <= row["pass_rate"] <= 1
    calibrated = ctx.lake.finished_items("calibrate")
    reviewed = {
        r["item_id"] for r in ctx.lake.rows("SELECT item_id FROM status WHERE stage = 'review'")
    }
    assert reviewed == calibrated  # every calibrated task was reviewed (or is waiting on a retry)
    attempts = {r["attempt_id"] for r in ctx.lake.rows("SELECT attempt_id FROM attempts")}
    for item in ctx.lake.rows("SELECT attempt_id, category FROM rubrics"):
        assert item["attempt_id"] in attempts and item["category"]
    rollouts = {r["rollout_id"] for r in ctx.lake.rows("SELECT rollout_id FROM proxy_calls")}
    for attempt in ctx.lake.rows("SELECT rollout_id FROM attempts"):
        assert attempt["rollout_id"] in rollouts  # every solver attempt went through the proxy


@pytest.mark.full
def test_a_plain_llama_cpp_server_behind_a_faulty_proxy_is_enough(tmp_path):
    """`OPENAI_BASE_URL` at a plain llama_cpp.server (the embedded runtime, started here) behind
    a proxy that injects 30% transient faults, and no capability setting: the run finds the
    server's structured-output mode itself and exports tasks."""
    config = tmp_path / "foundry.toml"
    config.write_text(
        '[generate]\nmax_chunks = 6\n[calibrate]\nk = 2\nmethod = "fixed"\n'
        "[repair]\nmax_steps = 0\n"
    )
    docs = [str(SAMPLE_DOCS / "lumetra-x2-kettle.md")]
    with (
        embedded_server(n_threads=2) as upstream,
        FaultProxy(upstream, fault_rate=0.3, seed=7) as proxy,
    ):
        env = {**os.environ, "OPENAI_BASE_URL": proxy.base_url}
        command = [sys.executable, "-m", "flows.cli", "run", "--kind", "doc_qa", *docs]
        command += ["--home", str(tmp_path / "home"), "--config", str(config)]
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
        )

    assert done.returncode == 0, done.stderr[-3000:]
    assert "structured output json_object + schema, n: no" in done.stderr
    assert proxy.served["forwarded"] and sum(proxy.served.values()) > proxy.served["forwarded"]
    exported = re.search(r"taskset: \S+ \((\d+) tasks", done.stdout)
    assert exported and int(exported.group(1)) > 0, done.stdout[-2000:]
