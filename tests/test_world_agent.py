"""The tool-calling solver on a world, end to end: scripted and over HTTP, through native
tool calls (OpenAI tools API) and through JSON actions, graded the same way."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from data.config import WorldsConfig
from data.llm import LLMClient, ResponseCache, ToolCallRequest
from generators import world_tasks
from generators.world_tasks import Candidate, LoadedWorld
from harnesses.world import World, load_world_spec
from harnesses.world_agent import (
    ACTIONS_NAME,
    NAME,
    WorldTools,
    action_schema,
    environment_for,
    opening,
    solve,
    solve_with_actions,
)
from harnesses.world_check import passes
from harnesses.world_replay import replay
from judges import world_state
from tests.conftest import endpoints_for
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM, ToolCalls, fake_endpoints

SHOP = Path(__file__).resolve().parent.parent / "data" / "samples" / "worlds" / "outdoor_shop.toml"
RETURN = {"order_id": 88213, "sku": "POLE-TR", "qty": 1, "opened": True}
INSTRUCTION = (
    "I'm maren@example.test: please return one pair of the trekking poles from my last order;"
    " I opened the box."
)


def tool_results(messages: list[dict]) -> int:
    return sum(m["role"] == "tool" for m in messages)


async def attempt(llm, spec, initial, max_turns=6, solver=solve):
    return await solver(
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


def run(llm, spec, initial, max_turns=6, solver=solve):
    return asyncio.run(attempt(llm, spec, initial, max_turns, solver))


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


# --- JSON actions: servers that return no native tool calls ----------------------------------


def action(tool: str, **arguments) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


def test_json_actions_look_up_then_change_the_world_and_pass():
    spec = load_world_spec(SHOP)
    initial = World(spec).snapshot()
    gold = replay(spec, initial, [("create_return", RETURN)]).final
    script = [
        action("find_customer", email="maren@example.test"),
        action("list_orders", customer_id="C-1001"),
        action("create_return", **RETURN),
        json.dumps({"tool": "answer", "answer": "Done: 75.65 will be refunded."}),
    ]

    def agent(role, messages, params):
        assert role == "solver" and "tools" not in params  # the tools are in the prompt
        told = [m["content"] for m in messages[2:] if m["role"] == "user"]
        assert all(t.startswith("Result: ") for t in told)  # each result as a user message
        if len(told) == 2:
            assert "C-1001" in told[0]
        return script[len(told)]

    llm = ScriptedLLM(agent, roles=["solver"])
    done = run(llm, spec, initial, solver=solve_with_actions)
    assert [c[0] for c in done.calls] == ["find_customer", "list_orders", "create_return"]
    assert done.turns == 4 and done.answer.startswith("Done")
    assert passes(done.final, gold)
    assert set(llm.rollouts) == {"r-1"}
    assert World(spec).snapshot() == initial  # the attempt had its own copy
    _, messages, params = llm.requests[0]
    system = messages[0]["content"]
    assert system.startswith(opening(spec, INSTRUCTION)[0]["content"].strip())  # the task's own
    assert all(f"- {tool.name}: " in system for tool in spec.tools)  # then every tool described
    assert messages[1] == {"role": "user", "content": INSTRUCTION}
    schema = params["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["tool"]["enum"] == [t.name for t in spec.tools] + ["answer"]
    shapes = schema["properties"]["arguments"]["anyOf"]  # each tool's arguments, typed
    assert {
        "type": "object",
        "properties": {"email": {"type": "string", "maxLength": 200}},
        "required": ["email"],
        "additionalProperties": False,
    } in shapes
    assert len(shapes) == len(spec.tools) - 1  # get_order and cancel_order take the same
    seeds = [params["seed"] for *_, params in llm.requests]
    assert len(set(seeds)) == 4 and seeds[0] == 7  # every turn its own seed


def test_an_unusable_action_costs_its_turn_and_running_out_leaves_no_answer():
    spec = load_world_spec(SHOP)
    initial = World(spec).snapshot()
    replies = iter(
        [
            "I will look that up.",  # not JSON
            json.dumps({"tool": "delete_everything", "arguments": {}}),  # not one of the tools
            action("create_return", order_id="88213"),  # the world refuses the arguments
        ]
    )
    llm = ScriptedLLM(lambda *_: next(replies), roles=["solver"])
    done = run(llm, spec, initial, max_turns=3, solver=solve_with_actions)
    assert done.turns == 3 and done.answer == ""  # the turns ran out
    assert [c[0] for c in done.calls] == ["create_return"]  # the one usable action ran
    assert "invalid arguments" in done.calls[0][2] and done.final == initial
    told = [m["content"] for m in llm.requests[-1][1] if m["role"] == "user"][1:]
    assert [t.split(" (")[0] for t in told[:2]] == ["That is not a valid action"] * 2
    assert told[2].startswith("Result: ")
    assert json.loads(done.text()) == {
        "answer": "",
        "calls": [{"arguments": {"order_id": "88213"}, "name": "create_return"}],
    }


def shop_tasks() -> tuple[Oracle, list]:
    """Planted tasks on the shop world, written by an oracle that remembers their gold calls."""
    oracle = Oracle()
    spec = load_world_spec(SHOP)
    world = LoadedWorld(spec.world_id, f"file:{SHOP}", spec)
    llm = ScriptedLLM(oracle.respond, roles=["generator"])
    made = asyncio.run(world_tasks.generate(world, llm, WorldsConfig(tasks_per_world=2)))
    tasks = [r.task for r in made if isinstance(r, Candidate)]
    assert tasks, made
    return oracle, tasks


def test_both_protocols_make_the_same_attempt_and_the_verifier_grades_it_the_same():
    """The oracle makes the gold calls on even seeds and answers at once on odd ones, through
    native tool calls and through JSON actions over HTTP: the attempt texts are the same, and
    `judges.world_state.grade` scores them alike (the gold calls 1)."""
    oracle, tasks = shop_tasks()
    with FakeOpenAIServer(oracle) as server:

        async def attempts(name: str, task) -> list[str]:
            llm = LLMClient(endpoints_for(server), cache=None)
            try:
                replies = await WorldTools(name).attempt(
                    task, llm, ["r-0", "r-1"], temperature=0.0, max_tokens=128, seed=0
                )
            finally:
                await llm.aclose()
            return [reply.text for reply in replies]

        for task in tasks:
            native = asyncio.run(attempts(NAME, task))
            actions = asyncio.run(attempts(ACTIONS_NAME, task))
            assert native == actions
            assert [world_state.grade(task, text).reward for text in actions] == [1.0, 0.0]
    with_actions = [b for b in server.requests if "tools" not in b]
    assert with_actions and all(b["response_format"] for b in with_actions)


def test_the_environment_follows_the_solver_server_unless_configured():
    returns, never = (
        fake_endpoints("http://x/v1", tool_calls=flag)["solver"] for flag in (True, False)
    )
    assert (environment_for(returns), environment_for(never)) == (NAME, ACTIONS_NAME)
    assert environment_for(returns, "actions") == ACTIONS_NAME
    assert environment_for(never, "tools") == NAME
    assert WorldTools(ACTIONS_NAME).name == ACTIONS_NAME and WorldTools().name == NAME
    with pytest.raises(ValueError, match="no world environment"):
        WorldTools("world_prose")
    shop = load_world_spec(SHOP)
    clash = shop.model_copy(
        update={"tools": [*shop.tools, shop.tools[0].model_copy(update={"name": "answer"})]}
    )
    with pytest.raises(ValueError, match="named 'answer'"):
        action_schema(clash)
