"""The suite reaches no network. `make test` runs it in a network namespace where only loopback
is up (`tests/without_network.sh`), and the test environments of the sample repositories are
built from the wheels `make test` downloads beside the install (`.wheels/sandbox`, through
pip's own `PIP_NO_INDEX` and `PIP_FIND_LINKS`) instead of from a package registry. A plain
`pytest` run, outside `make test`, has the network: these tests then skip, saying so."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from data.runtime.python_env import EnvError, ensure_env

CUT = os.environ.get("FOUNDRY_NETWORK_CUT") == "1"
WHEELS = os.environ.get("PIP_FIND_LINKS", "") if os.environ.get("PIP_NO_INDEX") == "1" else ""
through_make_test = pytest.mark.skipif(
    not (CUT and WHEELS),
    reason="run through `make test`: it cuts the network and builds from the sandbox's wheels",
)


def interfaces() -> list[str]:
    """The network interfaces of this process's network namespace (/proc/self/net/dev)."""
    lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    return sorted(line.split(":", 1)[0].strip() for line in lines)


@through_make_test
def test_the_suite_runs_with_only_loopback():
    assert interfaces() == ["lo"]
    with pytest.raises(OSError):  # no route out: an address needs no name to be resolved
        socket.create_connection(("192.0.2.1", 443), timeout=5).close()
    with socket.create_server(("127.0.0.1", 0)) as server:  # the tests' own servers still listen
        socket.create_connection(server.getsockname(), timeout=5).close()


@through_make_test
def test_a_sample_repository_s_environment_is_built_from_the_wheels_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUNDRY_ENV_CACHE", str(tmp_path / "envs"))  # built now, not reused
    env = ensure_env(["pytest"])
    ran = subprocess.run(
        [env / "bin" / "python", "-m", "pytest", "--version"], capture_output=True, text=True
    )
    assert ran.returncode == 0 and "pytest" in ran.stdout + ran.stderr
    # without the wheels there is nowhere to install from: the build fails, saying why
    monkeypatch.setenv("FOUNDRY_ENV_CACHE", str(tmp_path / "other-envs"))
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
    with pytest.raises(EnvError, match="pytest"):
        ensure_env(["pytest"])
