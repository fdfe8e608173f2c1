"""The solver's accepted rollouts as `messages` (+ `tools`) rows, for SFTTrainer: a single-reply
attempt as its prompt and reply, a multi-turn one as the episode the recording proxy saw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from data.export.environments import environment_of
from data.export.projections.base import Inputs, Projector, Row, write_rows
from data.lake import Lake

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
                "split": task["split"],  # an eval task's rollouts go to `eval.parquet` only
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


def _write(out: Path, version: Path, tasks: list[Row], inputs: Inputs) -> tuple[int, dict]:
    rows, skipped = sft_rows(tasks, inputs.lake)
    return write_rows(out, rows, SFT_SCHEMA, [row["split"] for row in rows]), skipped


PROJECTION = Projector("sft", "accepted rollouts as messages", _write)
