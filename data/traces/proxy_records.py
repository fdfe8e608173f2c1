"""The interception proxy's records read as conversations: the `proxy_calls` shards, each
rollout's calls threaded into the conversations they continue."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from data.traces.conversation import (
    Conversation,
    Item,
    Malformed,
    Unreadable,
    content_text,
    guarded,
    moment,
    openai_exchange,
)

PROXY_COLUMNS = {"rollout_id", "messages", "response", "status", "started_at", "model"}


def read_proxy_records(files: list[Path]) -> Iterator[Item]:
    """The rollouts recorded in proxy shards (parquet files of the `proxy_calls` table)."""
    rows: list[dict[str, Any]] = []
    for path in sorted(files):
        try:
            table = pq.read_table(path)
        except (OSError, ValueError) as exc:
            yield Malformed(str(path), "unreadable_file", str(exc))
            continue
        missing = PROXY_COLUMNS - set(table.column_names)
        if missing:
            yield Malformed(str(path), "not_proxy_records", f"missing {sorted(missing)}")
            continue
        rows += table.to_pylist()
    yield from proxy_rollouts(rows, str(files[0].parent) if files else "")


def proxy_rollouts(rows: list[dict[str, Any]], name: str) -> Iterator[Item]:
    """Conversations from proxy records (parquet rows or their JSON lines). An SDK retry
    shares its call id: the row with the highest retry count (of those, the one read last) is
    the call's outcome. Within a rollout, a call continues a conversation when it resends that
    conversation's last call; otherwise it starts another (a rollout id taken
    from an API key's hash holds every exchange made with that key). Each conversation ends
    with its last successful call."""
    calls: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        key = str(row.get("call_id") or i)
        if key not in calls or _int(row.get("retry")) >= _int(calls[key].get("retry")):
            calls[key] = row
    rollouts: dict[str, list[dict[str, Any]]] = {}
    for row in calls.values():
        rollouts.setdefault(str(row["rollout_id"]), []).append(row)
    for rollout, group in sorted(rollouts.items()):
        origin = f"{name}#{rollout}"
        done = sorted((r for r in group if r["status"] == 200), key=lambda r: str(r["started_at"]))
        if not done:
            yield Malformed(origin, "no_successful_call", f"{len(group)} calls, none answered 200")
            continue
        threads = guarded(origin, lambda done=done: _threads(done))
        if isinstance(threads, Malformed):
            yield threads
            continue
        for n, thread in enumerate(threads):
            where = origin if n == 0 else f"{origin}#{n}"
            yield guarded(
                where, lambda last=thread[-1], where=where: _proxy_conversation(last, where)
            )


def _threads(calls: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Calls (in time order) grouped into conversations: a call joins the thread whose last
    call's messages its own messages start with (an agent resends the history, with its own
    version of the model's answer, so the answer itself is not compared)."""
    threads: list[tuple[list[tuple[str, str]], list[dict[str, Any]]]] = []
    for call in calls:
        sent = _turns(json.loads(call["messages"]))
        for index, (seen, members) in enumerate(threads):
            if sent[: len(seen)] == seen:
                threads[index] = (sent, [*members, call])
                break
        else:
            threads.append((sent, [call]))
    return [members for _, members in threads]


def _turns(messages: list[Any]) -> list[tuple[str, str]]:
    return [
        (str(m.get("role")), content_text(m.get("content")))
        for m in messages
        if isinstance(m, dict)
    ]


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _proxy_conversation(row: dict[str, Any], origin: str) -> Conversation:
    try:
        messages = json.loads(row["messages"])
        choices = json.loads(row["response"])
        params = json.loads(row.get("params") or "{}")
    except (TypeError, ValueError) as exc:
        raise Unreadable("bad_proxy_record", str(exc)) from exc
    tools = params.get("tools") if isinstance(params, dict) else None
    body = {"messages": messages, "tools": tools or [], "model": row["model"]}
    conversation = openai_exchange(body | {"response": {"choices": choices}}, origin)
    conversation.format = "proxy"
    conversation.occurred_at = moment(row["started_at"])
    return conversation
