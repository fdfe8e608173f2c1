"""Run by tests/test_package_families.py with the verifiers virtualenv's Python: rolls out every
task of an installed package with `vf-eval`, the `null` harness and the subprocess runtime (as
the prime-rl fragment trains), against the model endpoint BASE_URL (a scripted fake server; its
key in $FAKE_API_KEY). The harness's chat program runs on this virtualenv's own Python, which
has every dependency the program declares, instead of in a uv environment built from the
network. Prints one JSON line: per task key, its reward, stop condition, model turns, and the
tool messages the model was given.

Usage: python verifiers_rollout.py TASKSET_ID BASE_URL OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from verifiers.v1.cli.eval.main import main
from verifiers.v1.runtimes.subprocess import SubprocessRuntime

PROGRAM = "chat_program.py"


async def local_program(
    self: SubprocessRuntime,
    script: str | bytes,
    env: dict[str, str] | None = None,
    *,
    activate: bool = True,
) -> list[str]:
    """The program written into the runtime's folder, run by this Python."""
    await self.write(PROGRAM, script.encode() if isinstance(script, str) else script)
    assert self.workdir is not None
    return [sys.executable, str(self.workdir / PROGRAM)]


def rollouts(taskset_id: str, base_url: str, out: str) -> dict[str, Any]:
    SubprocessRuntime.prepare_uv_script = local_program  # type: ignore[method-assign]
    main(
        [taskset_id, "--model", "fake-model", "--client.base-url", base_url]
        + ["--client.api-key-var", "FAKE_API_KEY", "--env.agent.harness.id", "null"]
        + ["--env.agent.runtime.type", "subprocess", "--no-push", "--no-rich"]
        + ["-o", out, "--run.dir", "rollouts"]
    )
    found = {}
    for line in (Path(out) / "rollouts" / "traces.jsonl").read_text().splitlines():
        (trace,) = json.loads(line)["traces"]
        messages = [node["message"] for node in trace["nodes"]]
        found[trace["task"]["key"]] = {
            "reward": trace["rewards"]["correct"]["score"],
            "stop": trace["stop_condition"],
            "turns": sum(bool(node.get("sampled")) for node in trace["nodes"]),
            "tools": [m["content"] for m in messages if m["role"] == "tool"],
        }
    return found


if __name__ == "__main__":
    print(json.dumps(rollouts(sys.argv[1], sys.argv[2], sys.argv[3])))
