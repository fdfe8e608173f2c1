"""End to end: a scripted agent talks to the embedded model through the recording proxy; the
proxy's records are ingested as traces and turned into tasks.

The agent is a script, not a model: per conversation it asks the model (offering a tool), then
makes the tool call itself, feeds the result back and asks for the final reply, so every
rollout holds a real tool-using exchange. The foundry's own models are the oracle fake, so the
test asserts the path (records -> traces -> tasks), never the 135M model's words.
"""

from __future__ import annotations

import json

import httpx
import pytest

from data.lake import Lake
from data.llm import embedded_server
from data.traces import ingest_traces
from harnesses.proxy import running_proxy
from tests.conftest import endpoints_for, make_context, run_llm_stages

pytestmark = pytest.mark.embedded

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Find an order by its id.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    },
}
CONVERSATIONS = [
    ("ORD-301", "Where is order ORD-301? Email me at ana.silva@example.com."),
    ("ORD-302", "Has order ORD-302 shipped yet?"),
    ("ORD-303", "What did I buy in order ORD-303?"),
]
RESULTS = {
    "ORD-301": {"status": "shipped", "eta": "Friday"},
    "ORD-302": {"status": "processing"},
    "ORD-303": {"status": "delivered", "items": ["Lumetra X2 kettle"]},
}


def agent(proxy_url: str) -> None:
    """Each conversation: ask, call `lookup_order` with the request's order id, answer."""
    with httpx.Client(base_url=proxy_url, timeout=120) as http:
        for n, (order, question) in enumerate(CONVERSATIONS):
            headers = {"X-Rollout-Id": f"agent-{n}", "Authorization": "Bearer local"}
            messages = [
                {"role": "system", "content": "You are a shop's support assistant. Be brief."},
                {"role": "user", "content": question},
            ]
            first = {"messages": messages, "tools": [LOOKUP], "max_tokens": 24, "seed": n}
            http.post("/chat/completions", json=first, headers=headers).raise_for_status()
            call = {
                "id": f"call-{n}",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": order})},
            }
            messages += [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {
                    "role": "tool",
                    "tool_call_id": f"call-{n}",
                    "content": json.dumps(RESULTS[order]),
                },
            ]
            final = {"messages": messages, "max_tokens": 48, "seed": n}
            http.post("/chat/completions", json=final, headers=headers).raise_for_status()


def test_agent_traces_through_the_proxy_become_tasks(tmp_path, oracle_server):
    production = Lake(tmp_path / "production")
    with (
        embedded_server(n_threads=2) as model_url,
        running_proxy(model_url, production, "agent-run") as proxy_url,
    ):
        agent(proxy_url)
    assert len(production.rows("SELECT * FROM proxy_calls")) == 2 * len(CONVERSATIONS)

    ctx = make_context(tmp_path / "foundry", calibrate={"k": 2})
    shards = str(tmp_path / "production" / "lake" / "proxy_calls")
    counts = ingest_traces([shards], ctx.lake, ctx.config.traces, ctx.run_id, lambda m: None)
    assert counts == {"done:ingested": len(CONVERSATIONS)}
    traces = ctx.lake.records("traces")
    assert {t.format for t in traces} == {"proxy"}
    assert all([c.name for c in t.tool_calls] == ["lookup_order"] for t in traces)
    assert "ana.silva@example.com" not in json.dumps([t.to_row() for t in traces], default=str)

    run_llm_stages(ctx, endpoints_for(oracle_server))
    rated = ctx.lake.rows("SELECT status, reason FROM status WHERE stage = 'trace_tasks'")
    assert len(rated) == len(CONVERSATIONS) and all(r["status"] != "failed" for r in rated)
    tasks = ctx.lake.records("tasks")
    made = {t.kind for t in tasks}
    assert tasks and made <= {"trace_answer", "near_miss", "tool_replay", "world_tool_use"}
    # a world built from the traces' calls, and the tasks planted on it, hold no personal data
    assert ctx.lake.rows("SELECT count(*) AS n FROM worlds")[0]["n"] >= 1
    planted = json.dumps([t.to_row() for t in tasks], default=str)
    assert "ana.silva@example.com" not in planted + json.dumps(
        ctx.lake.rows("SELECT * FROM worlds"), default=str
    )
    replays = [t for t in tasks if t.kind == "tool_replay"]
    for task in replays:
        [call] = task.verifier.tool_calls
        assert call.name == "lookup_order" and call.arguments["order_id"] in RESULTS
    verified = ctx.lake.rows("SELECT count(*) AS n FROM status WHERE stage = 'verify'")
    assert verified[0]["n"] == len(tasks)
