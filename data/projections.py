"""Trainer projections of an exported taskset version: the same tasks in the shapes trainers read.

Each projection is a folder inside the version (`vNNNN/<format>/`), written in a hidden folder
and renamed into place, so a reader never sees half of one and a re-run writes nothing:

- `trl`: TRL's prompt-only conversational shape (`prompt` as chat messages) plus the columns the
  reward functions in `judges.rewards` read (`solution`, `verifier`, `kind`, ...).
- `verifiers`: the verifiers library's classic shape (`example_id`, `prompt`, `question`,
  `answer`, `info` as JSON, `task`) and a verifiers v1 taskset package (`data/verifiers_package`).
- `prime-rl`: an `rl.toml` fragment training on that package with calibrated difficulty pools.
- `sft`: the solver's accepted rollouts as `messages` (+ `tools`) rows.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import pyarrow as pa
import pyarrow.parquet as pq

from data.config import ExportFormat
from data.environments import environment_of
from data.export import MESSAGE
from data.lake import Lake

if TYPE_CHECKING:
    from data.verifiers_package import Graders

FORMATS: tuple[str, ...] = get_args(ExportFormat)
PART = "part-00000.parquet"

TRL_SCHEMA = pa.schema(
    [
        ("prompt", pa.list_(MESSAGE)),
        ("solution", pa.string()),
        ("verifier", pa.string()),
        ("kind", pa.string()),
        ("task_id", pa.string()),
        ("workspace", pa.string()),
        ("environment", pa.string()),
        ("world", pa.string()),
        ("tools", pa.string()),
        ("pass_rate", pa.float64()),
        ("band", pa.string()),
        ("pool", pa.string()),
        ("harness", pa.string()),
        ("evidence", pa.string()),
        ("split", pa.string()),
    ]
)
VERIFIERS_SCHEMA = pa.schema(
    [
        ("example_id", pa.int64()),
        ("prompt", pa.list_(MESSAGE)),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("info", pa.string()),
        ("task", pa.string()),
    ]
)
# An episode's message as TRL's SFTTrainer and the chat templates read it: an assistant turn may
# carry tool calls (arguments as the JSON text the model wrote), a tool turn names its call.
TOOL_CALL = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
EPISODE_MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(TOOL_CALL)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)
SFT_SCHEMA = pa.schema(
    [
        ("messages", pa.list_(EPISODE_MESSAGE)),
        ("tools", pa.string()),
        ("task_id", pa.string()),
        ("kind", pa.string()),
        ("attempt_id", pa.string()),
        ("harness", pa.string()),
        ("solver_model", pa.string()),
        ("reward", pa.float64()),
        ("split", pa.string()),
    ]
)
# Attempts that count as accepted rollouts: a full pass of the task's verifier.
ACCEPTED_REWARD = 1.0


@dataclass(frozen=True)
class Projection:
    format: str
    path: Path
    rows: int
    written: bool  # False when the version already had it
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows left out


def project(version: Path, fmt: str, lake: Lake, *, graders: Graders) -> Projection:
    """Write projection `fmt` of the taskset version folder `version` (unless it is there);
    `graders`: how the verifiers package grades each verifier type (the registry's,
    `judges.verifier_types.package_graders()`)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose from {', '.join(FORMATS)}")
    target = version / fmt
    if target.is_dir():
        summary = json.loads((target / "projection.json").read_text())
        return Projection(fmt, target, summary["rows"], False, summary["skipped"])
    tasks = canonical_rows(version)
    writers: dict[str, Callable[[Path], tuple[int, dict[str, int]]]] = {
        "trl": lambda out: _write_rows(out, [trl_row(t) for t in tasks], TRL_SCHEMA),
        "verifiers": lambda out: _write_verifiers(out, version, tasks, graders),
        "prime-rl": lambda out: _write_prime_rl(out, version, tasks, graders),
        "sft": lambda out: _write_sft(out, tasks, lake),
    }
    tmp = version / f".{fmt}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    rows, skipped = writers[fmt](tmp)
    summary = {"format": fmt, "rows": rows, "skipped": skipped}
    (tmp / "projection.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, target)
    return Projection(fmt, target, rows, True, skipped)


def canonical_rows(version: Path) -> list[dict[str, Any]]:
    """The tasks of a taskset version, as its manifest lists its parquet parts."""
    manifest = json.loads((version / "manifest.json").read_text())
    tables = [pq.read_table(version / part) for part in manifest["files"]]
    return pa.concat_tables(tables).to_pylist() if tables else []


def trl_row(task: dict[str, Any]) -> dict[str, Any]:
    """One TRL GRPO row: the prompt, and the columns the reward functions are passed."""
    return {
        "prompt": task["prompt"],
        "solution": task["answer"],
        "verifier": task["verifier"],
        "kind": task["kind"],
        "task_id": task["task_id"],
        "workspace": task["workspace"],
        "environment": task["environment"],
        "world": task.get("world"),
        "tools": task.get("tools"),
        "pass_rate": task["pass_rate"],
        "band": task["band"],
        "pool": task["pool"],
        "harness": task["harness"],  # the environment its pass rate was measured in
        "evidence": task["evidence"],  # grader-side, like `solution`: what a gold episode reads
        "split": task.get("split"),  # train on `train` only
    }


def verifiers_row(index: int, task: dict[str, Any]) -> dict[str, Any]:
    """One row of the verifiers classic shape; `info` holds what scoring needs, as JSON."""
    info = {
        "task_id": task["task_id"],
        "kind": task["kind"],
        "verifier": json.loads(task["verifier"]),
        "workspace": json.loads(task["workspace"]) if task["workspace"] else None,
        "environment": json.loads(task["environment"]) if task["environment"] else None,
        "world": json.loads(task["world"]) if task.get("world") else None,
        "pass_rate": task["pass_rate"],
        "band": task["band"],
        "pool": task["pool"],
        "intent": task["intent"],
        "split": task.get("split"),
    }
    return {
        "example_id": index,
        "prompt": task["prompt"],
        "question": last_user_message(task["prompt"]),
        "answer": task["answer"],
        "info": json.dumps(info, sort_keys=True, ensure_ascii=False),
        "task": task["kind"],
    }


def last_user_message(messages: list[dict[str, str]]) -> str:
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


def _write_rows(out: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> tuple[int, dict]:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / PART)
    return len(rows), {}


def _write_verifiers(
    out: Path, version: Path, tasks: list[dict[str, Any]], graders: Graders
) -> tuple[int, dict]:
    from data.verifiers_package import write_package

    rows = [verifiers_row(i, t) for i, t in enumerate(tasks)]
    _write_rows(out, rows, VERIFIERS_SCHEMA)
    left_out = write_package(out / "taskset", version, tasks, graders)
    return len(rows), {f"from_v1_package:{reason}": n for reason, n in left_out.items()}


def _write_prime_rl(
    out: Path, version: Path, tasks: list[dict[str, Any]], graders: Graders
) -> tuple[int, dict]:
    from data.prime_rl import write_rl_toml

    return write_rl_toml(out / "rl.toml", version, tasks, graders)


# --- SFT: accepted rollouts ---------------------------------------------------------------


def _write_sft(out: Path, tasks: list[dict[str, Any]], lake: Lake) -> tuple[int, dict]:
    rows, skipped = sft_rows(tasks, lake)
    _write_rows(out, rows, SFT_SCHEMA)
    return len(rows), skipped


def sft_rows(tasks: list[dict[str, Any]], lake: Lake) -> tuple[list[dict[str, Any]], dict]:
    """The accepted attempts (a full pass) on the version's tasks as chat transcripts, one per
    distinct transcript. A task flagged hackable contributes none (its rewarded attempts may
    game the verifier); a multi-turn attempt whose calls the proxy did not record is skipped."""
    by_id = {t["task_id"]: t for t in tasks}
    skipped: dict[str, int] = {}
    attempts = lake.rows(
        "SELECT attempt_id, task_id, harness, solver_model, response, reward, rollout_id"
        " FROM attempts WHERE list_contains(?, task_id) AND reward >= ?"
        ' ORDER BY task_id, solver_model, "index", attempt_id',
        [list(by_id), ACCEPTED_REWARD],
    )
    calls = _last_calls(lake, [a["rollout_id"] for a in attempts if a["rollout_id"]])
    rows, seen = [], set()
    for attempt in attempts:
        task = by_id[attempt["task_id"]]
        if task["hackable"]:
            skipped["hackable_task"] = skipped.get("hackable_task", 0) + 1
            continue
        transcript = _transcript(attempt, task, calls.get(attempt["rollout_id"]))
        if transcript is None:
            skipped["no_recorded_rollout"] = skipped.get("no_recorded_rollout", 0) + 1
            continue
        messages, tools = transcript
        key = json.dumps([attempt["task_id"], messages], sort_keys=True)
        if key in seen:
            skipped["duplicate_transcript"] = skipped.get("duplicate_transcript", 0) + 1
            continue
        seen.add(key)
        rows.append(
            {
                "messages": messages,
                "tools": json.dumps(tools, sort_keys=True),
                "task_id": attempt["task_id"],
                "kind": task["kind"],
                "attempt_id": attempt["attempt_id"],
                "harness": attempt["harness"],
                "solver_model": attempt["solver_model"],
                "reward": attempt["reward"],
                "split": task.get("split"),  # an eval task's rollouts are for evaluation only
            }
        )
    return rows, dict(sorted(skipped.items()))


def _last_calls(lake: Lake, rollouts: list[str]) -> dict[str, dict[str, Any]]:
    """Each rollout's last successful recorded call (its messages hold the whole episode)."""
    if not rollouts:
        return {}
    rows = lake.rows(
        "SELECT rollout_id, messages, params, response FROM proxy_calls"
        " WHERE list_contains(?, rollout_id) AND status = 200"
        " QUALIFY row_number() OVER (PARTITION BY rollout_id ORDER BY started_at DESC) = 1",
        [rollouts],
    )
    return {r["rollout_id"]: r for r in rows}


def _transcript(
    attempt: dict[str, Any], task: dict[str, Any], call: dict[str, Any] | None
) -> tuple[list[dict[str, str]], list[Any]] | None:
    """(messages, tools) of an accepted attempt: the task prompt and the reply where the
    attempt's environment offers no tools, else the episode as its last recorded call sent and
    received it."""
    if not environment_of({**task, "harness": attempt["harness"]}).with_tools:
        return [*task["prompt"], {"role": "assistant", "content": attempt["response"]}], []
    if call is None:
        return None
    choices = json.loads(call["response"])
    if not choices:
        return None
    sent = [episode_message(m) for m in json.loads(call["messages"])]
    reply = episode_message(choices[0].get("message") or {})
    return [*sent, {**reply, "role": "assistant"}], json.loads(call["params"]).get("tools", [])


def episode_message(message: dict[str, Any]) -> dict[str, Any]:
    """A recorded chat message as an SFT episode keeps it: role and text (content parts
    joined), and the tool calls an assistant made or the call a tool message answers."""
    content = message.get("content") or ""
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    kept: dict[str, Any] = {"role": str(message.get("role", "")), "content": str(content)}
    calls = [_tool_call(c) for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    if calls:
        kept["tool_calls"] = calls
    for key in ("tool_call_id", "name"):
        if message.get(key):
            kept[key] = str(message[key])
    return kept


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments", "")
    return {
        "id": str(call.get("id", "")),
        "type": str(call.get("type", "function")),
        "function": {
            "name": str(function.get("name", "")),
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }
