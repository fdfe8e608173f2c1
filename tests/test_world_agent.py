"""The tool-calling solver on a world, end to end: scripted and over HTTP (OpenAI tools API)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from data.llm import LLMClient, ToolCallRequest
from data.llm_cache import ResponseCache
from harnesses.world import World, load_world_spec
from harnesses.world_agent import opening, solve
from harnesses.world_check import passes
from harnesses.world_replay import replay
from tests.conftest import endpoints_for
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.scripted_llm import ScriptedLLM, ToolCalls

SHOP = Path(__file__).resolve().parent.parent / "data" / "samples" / "worlds" / "outdoor_shop.toml"
RETURN = {"order_id": 88213, "sku": "POLE-TR", "qty": 1, "opened": True}
INSTRUCTION = (
    "I'm maren@example.test: please return one pair of the trekking poles from my last order;"
    " I opened the box."
)


def tool_results(messages: list[dict]) -> int:
    return sum(m["role"] == "tool" for m in messages)


async def attempt(llm, spec, initial, max_turns=6):
    return await solve(
        llm,
        spec,
        initial,
        opening(spec, INSTRUCTION),
        rollout_id="r-1",
        max_turns=max_turns,
        temperature=0.0,
        max_tokens=64,
        seed=7,
    )


def run(llm, spec, initial, max_turns=6):
    return asyncio.run(attempt(llm, spec, initial, max_turns))


def test_a_scripted_agent_looks_up_then_changes_the_world_and_passes():
    spec = load_world_spec(SHOP)
    initial = World(spec).snapshot()
    gold = replay(spec, initial, [("create_return", RETURN)]).final

    def agent(role, messages, params):
        assert role == "solver" and {t["function"]["name"] for t in params["tools"]} >= {
            "create_return"
        }
        seen = tool_results(messages)
        if seen == 0:
            return ToolCalls(
                [
                    ToolCallRequest("c1", "find_customer", '{"email": "maren@example.test"}'),
                    ToolCallRequest("c2", "list_orders", '{"customer_id": "C-1001"}'),
                ]
            )
        if seen == 2:
            assert messages[-2]["tool_call_id"] == "c1" and "C-1001" in messages[-2]["content"]
            return ToolCalls([ToolCallRequest("c3", "create_return", json.dumps(RETURN))])
        return "Done: 75.65 will be refunded."

    llm = ScriptedLLM(agent, roles=["solver"])
    attempt = run(llm, spec, initial)
    assert [c[0] for c in attempt.calls] == ["find_customer", "list_orders", "create_return"]
    assert attempt.turns == 3 and attempt.answer.startswith("Done")
    assert passes(attempt.final, gold)
    assert set(llm.rollouts) == {"r-1"}
    assert World(spec).snapshot() == initial  # the attempt had its own copy


def test_doing_nothing_fails_and_bad_calls_are_told_not_fatal():
    spec = load_world_spec(SHOP)
    initial = World(spec).snapshot()
    gold = replay(spec, initial, [("create_return", RETURN)]).final
    idle = run(ScriptedLLM(lambda *_: "All done!", roles=["solver"]), spec, initial)
    assert idle.calls == [] and not passes(idle.final, gold)

    def clumsy(role, messages, params):
        return ToolCalls([ToolCallRequest(f"c{len(messages)}", "create_return", "{oops")])

    stuck = run(ScriptedLLM(clumsy, roles=["solver"]), spec, initial, max_turns=3)
    assert stuck.turns == 3 and stuck.answer == ""  # the turns ran out
    assert all("arguments are not JSON" in result for *_, result in stuck.calls)
    assert stuck.final == initial


def test_tool_calls_travel_over_http_and_come_back_from_the_cache(tmp_path):
    spec = load_world_spec(SHOP)
    initial = World(spec).snapshot()
    gold = replay(spec, initial, [("create_return", RETURN)]).final

    def server_agent(body):
        assert body["tools"] and body["tools"][0]["type"] == "function"
        if not any(m["role"] == "tool" for m in body["messages"]):
            call = {"id": "call-1", "name": "create_return", "arguments": json.dumps(RETURN)}
            return {"tool_calls": [call]}
        return "Refund made."

    with FakeOpenAIServer(server_agent) as server:
        cache = ResponseCache(tmp_path / "cache")

        async def over_http():
            llm = LLMClient(endpoints_for(server), cache, "run-1")
            try:
                return await attempt(llm, spec, initial)
            finally:
                await llm.aclose()

        for expected_live in (2, 0):  # the second attempt is served from the cache
            before = len(server.requests)
            done = asyncio.run(over_http())
            assert len(server.requests) - before == expected_live
            assert [c[0] for c in done.calls] == ["create_return"]
            assert done.answer == "Refund made." and passes(done.final, gold)
