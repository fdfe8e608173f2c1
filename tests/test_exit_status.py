"""`foundry`'s exit status tells the truth: a model server that cannot be used stops the run
before any stage with one line naming the cause and the setting (exit 3); a run whose every LLM
call failed exits 4; a configuration typo exits 2; none of them prints a traceback. (Each cause
of an unusable server is tested at `resolve_endpoints`, in test_model_servers.py.)

The commands report to one Prefect server this module starts (a command's own temporary server
is what test_interrupt.py runs under), so each does not start its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from data.lake import Lake
from data.llm import PROBE_TOOL_NAME, free_port
from sources.documents import ingest_docs
from tests.conftest import SAMPLE_DOCS, make_context
from tests.fakes.openai_server import FakeOpenAIServer
from tests.processes import running_prefect_server

ROOT = Path(__file__).resolve().parent.parent
DOC = str(SAMPLE_DOCS / "lumetra-x2-kettle.md")
FAST = "[roles.generator]\nmax_retries = 1\n[roles.solver]\nmax_retries = 1\n"
FAST += "[[roles.judges]]\nmax_retries = 1\n[generate]\nmax_chunks = 2\n"


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("prefect-server")
    with running_prefect_server(root / "home", root / "server.log") as (api, _):
        yield api


def foundry(
    home: Path, api: str, *args: str, env: dict[str, str] | None = None, config: str = FAST
):
    """`foundry ARGS --home HOME` with a small config, reporting to the Prefect server at
    `api`; (exit status, stderr)."""
    (home.parent / "foundry.toml").write_text(config)
    command = [sys.executable, "-m", "flows.cli", *args, "--home", str(home)]
    command += ["--config", str(home.parent / "foundry.toml")]
    done = subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, "PREFECT_API_URL": api, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stderr


def last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


def assert_no_stage_ran(home: Path) -> None:
    lake = Lake(home)
    assert not lake.shards("status") and not lake.shards("tasks")


def test_a_closed_port_stops_the_run_with_one_line(tmp_path, prefect_api):
    url = f"http://127.0.0.1:{free_port()}/v1"

    code, stderr = foundry(tmp_path / "home", prefect_api, "run", DOC, env={"OPENAI_BASE_URL": url})

    assert code == 3
    assert "Traceback" not in stderr
    line = last_line(stderr)
    assert line.startswith("foundry: ") and "cannot reach the model server" in line
    assert url in line and "OPENAI_BASE_URL" in line
    assert_no_stage_ran(tmp_path / "home")


def test_a_config_typo_names_the_setting(tmp_path, prefect_api):
    code, stderr = foundry(
        tmp_path / "home", prefect_api, "run", DOC, config="[generate]\nmax_chunk = 2\n"
    )

    assert code == 2 and "Traceback" not in stderr
    assert last_line(stderr).endswith("generate.max_chunk: unknown setting")


def probe_only(body: dict) -> str:
    """Answers the servers' probes (structured output; tool calls, with none) and fails
    everything else (a 500 per request)."""
    asked = json.dumps(body["messages"])
    if "Reply with the JSON object" in asked:
        return '{"ok": true}'
    if PROBE_TOOL_NAME in asked:
        return "ready"
    raise RuntimeError("overloaded")


def test_a_run_whose_every_call_failed_exits_4_with_the_reasons(tmp_path, prefect_api):
    with FakeOpenAIServer(probe_only) as server:
        code, stderr = foundry(
            tmp_path / "home", prefect_api, "run", DOC, env={"OPENAI_BASE_URL": server.base_url}
        )

    assert code == 4 and "Traceback" not in stderr
    line = last_line(stderr)
    assert line.startswith("foundry: every LLM call of this run failed (http_500 x")


def test_a_stage_command_against_a_closed_port_exits_3(tmp_path, prefect_api):
    home = tmp_path / "home"
    url = f"http://127.0.0.1:{free_port()}/v1"
    ingest_docs([DOC], make_context(home))  # chunks pending for `generate`

    code, stderr = foundry(home, prefect_api, "generate", env={"OPENAI_BASE_URL": url})

    assert code == 3 and "Traceback" not in stderr
    assert "cannot reach the model server" in last_line(stderr)
