"""Worlds from traces: observing the tools traces used, the mechanical draft, the generator
model's spec, and the fidelity of a world replayed against the recorded calls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from data.lake import ToolCall, ToolSpec, Trace, TraceMessage
from data.llm import LLMError
from data.scrub import Scrubber
from data.traces import Conversation, read_file, scrubbed_trace
from generators.trace_world_draft import draft_spec
from generators.trace_worlds import observe, write_spec
from harnesses.observed_calls import Observation, ObservedCall, recorded_error
from harnesses.world import World, WorldSpec
from judges.world_fidelity import fidelity
from tests.fakes.scripted_llm import ScriptedLLM

SUPPORT_CHAT = (
    Path(__file__).resolve().parent.parent / "data" / "samples" / "traces" / "support-chat.jsonl"
)
SUPPORT_TOOLS = ["create_refund", "lookup_order", "track_shipment", "update_address"]


def sample_traces() -> list[Trace]:
    """The support-chat sample, read and scrubbed as ingestion does."""
    return [
        scrubbed_trace(item, Scrubber())
        for item in read_file(SUPPORT_CHAT)
        if isinstance(item, Conversation)
    ]


def support_observation() -> Observation:
    [observation] = observe(sample_traces())
    return observation


def trace(trace_id: str, turns: list[tuple[ToolCall, str | None]], tools=()) -> Trace:
    """A trace making these calls, each answered by its result (None: never answered)."""
    messages = [TraceMessage(role="user", content="Help me.")]
    for call, result in turns:
        messages.append(TraceMessage(role="assistant", content="", tool_calls=[call]))
        if result is not None:
            messages.append(TraceMessage(role="tool", content=result, tool_call_id=call.call_id))
    messages.append(TraceMessage(role="assistant", content="Done."))
    return Trace(
        trace_id=trace_id,
        origin="x.jsonl:1",
        format="openai",
        model="m",
        messages=messages,
        tools=list(tools),
        request="Help me.",
        answer="Done.",
        scrubbed={},
        embedding=[],
        ingested_at="2026-11-30T00:00:00Z",
    )


# a tiny shop: one item lookup that succeeds and one that fails
ITEM_CALLS = [
    ObservedCall(
        "get_item", {"item_id": "L-1"}, '{"name": "Lamp", "price": 12.5, "tags": ["x"]}', "t1"
    ),
    ObservedCall("get_item", {"item_id": "Q-9"}, '{"error": "no item Q-9"}', "t1"),
]
ITEM_OBSERVATION = Observation(
    key="items",
    tools=[ToolSpec(name="get_item", parameters={"type": "object"})],
    sequences=[ITEM_CALLS],
    trace_ids=["t1"],
)


def item_spec(
    result: str = "SELECT name, price, [tags] AS tags FROM items WHERE item_id = $item_id",
    price: str = "number",
    checked: bool = True,
) -> WorldSpec:
    """A world for ITEM_OBSERVATION; its defaults match the recorded shapes exactly."""
    check = {"sql": "SELECT 1 FROM items WHERE item_id = $item_id", "error": "no item {item_id}"}
    return WorldSpec.model_validate(
        {
            "name": "items",
            "tables": {
                "items": {
                    "columns": {"item_id": "text", "name": "text", "price": price, "tags": "text"},
                    "key": ["item_id"],
                }
            },
            "seed": {"items": [{"item_id": "L-1", "name": "Lamp", "price": 12.5, "tags": "x"}]},
            "tools": [
                {
                    "name": "get_item",
                    "description": "An item by its id.",
                    "checks": [check] if checked else [],
                    "result": result,
                    "returns": "row",
                }
            ],
        }
    )


# --- observing ---------------------------------------------------------------------------


def test_observing_the_sample_traces_finds_the_four_tools_and_their_results():
    observation = support_observation()
    assert [tool.name for tool in observation.tools] == SUPPORT_TOOLS
    assert observation.tools[1].parameters["required"] == ["order_id"]  # as offered
    assert len(observation.trace_ids) == len(observation.sequences) == 4  # the tool-using ones
    calls = {(c.name, json.dumps(c.arguments)): c.result for c in observation.calls}
    assert json.loads(calls[("lookup_order", '{"order_id": "ORD-20931"}')]) == {
        "status": "shipped",
        "tracking_number": "DC5510233",
        "items": 2,
    }
    assert json.loads(calls[("create_refund", json.dumps(_refund_arguments()))]) == {
        "refund_id": "RF-7781",
        "status": "approved",
    }
    in_order = [[c.name for c in calls] for calls in observation.sequences]
    assert ["lookup_order", "track_shipment"] in in_order
    assert ["lookup_order", "create_refund"] in in_order


def _refund_arguments() -> dict:
    return {"order_id": "ORD-18822", "amount": 39.9, "reason": "arrived damaged"}


def test_observe_groups_by_tool_set_infers_unoffered_tools_and_drops_unanswered_calls():
    offered = ToolSpec(name="get_item", parameters={"type": "object"})
    lookup = ToolCall(name="get_item", arguments={"item_id": "L-1"}, call_id="c1")
    ping = ToolCall(name="ping", arguments={"count": 2, "note": None}, call_id="c2")
    unanswered = ToolCall(name="get_item", arguments={"item_id": "L-2"}, call_id="c3")
    traces = [
        trace("a", [(lookup, '{"name": "Lamp"}'), (unanswered, None)], [offered]),
        trace("b", [(lookup, '{"name": "Lamp"}'), (ping, "pong")], [offered]),
        trace("c", [(unanswered, None)], [offered]),  # nothing answered: left out
    ]
    first, second = observe(traces)
    assert first.trace_ids == ["a"] and [c.arguments for c in first.calls] == [{"item_id": "L-1"}]
    assert second.trace_ids == ["b"] and [t.name for t in second.tools] == ["get_item", "ping"]
    assert second.tools[1].parameters == {
        "type": "object",
        "properties": {"count": {"type": "integer"}, "note": {}},
        "required": ["count", "note"],
    }
    assert first.key != second.key


# --- the draft ---------------------------------------------------------------------------


def test_the_draft_of_the_sample_traces_loads_and_replays_faithfully():
    observation = support_observation()
    spec = draft_spec(observation, "support_desk")
    assert WorldSpec.model_validate(spec.model_dump(mode="json")) == spec
    assert [tool.name for tool in spec.tools] == SUPPORT_TOOLS
    assert spec.tables["orders"].key == ["order_id"]
    assert {row["order_id"] for row in spec.seed["orders"]} == {
        "ORD-18822",
        "ORD-20931",
        "ORD-21007",  # named by update_address only: it exists too
    }
    report = fidelity(spec, observation)
    # lookup_order and track_shipment return the union of the fields seen for them, null where
    # a call did not show one: absent, as the recording has it
    assert (report.calls, report.score, report.mismatches) == (6, 1.0, [])


def test_draft_tools_fail_like_the_traces_and_write_new_records():
    world = World(draft_spec(support_observation(), "support_desk"))
    missing = world.call("lookup_order", {"order_id": "ORD-1"})
    assert not missing.ok and missing.error == "order ORD-1 not found"
    refunds = [world.call("create_refund", _refund_arguments()) for _ in range(2)]
    assert [r.content for r in refunds] == [
        {"refund_id": "RF-1", "status": "approved"},
        {"refund_id": "RF-2", "status": "approved"},
    ]
    assert world.call("update_address", {"order_id": "ORD-20931", "address": "1 Quay"}).ok
    assert world.query("SELECT address FROM orders WHERE order_id = 'ORD-20931'") == [
        {"address": "1 Quay"}
    ]


def test_draft_of_lists_nested_values_and_bare_ids():
    def call(name, arguments, result):
        return ObservedCall(name, arguments, json.dumps(result), "t1")

    calls = [
        call("search_products", {"query": "tent"}, [{"sku": "T1", "tags": ["a"]}, {"sku": "T2"}]),
        call("get_user", {"id": 7}, {"id": 7, "prefs": {"lang": "en"}}),
        call("get_user", {"id": 8}, {"error": "user 8 does not exist"}),
        call("create_ticket", {"user_id": 7, "subject": "x"}, {"ticket_id": 41, "state": "open"}),
        call("send_message", {"to": "ann"}, {"sent": True}),
    ]
    names = sorted({c.name for c in calls})
    observation = Observation("k", [ToolSpec(name=n) for n in names], [calls], ["t1"])
    spec = draft_spec(observation, "desk")
    assert spec.tables["users"].key == ["user_id"]  # `get_user(id)`: the user's id
    assert spec.tables["search_products_results"].key == ["query", "_position"]
    report = fidelity(spec, observation)
    assert report.score == 1.0, report.mismatches
    world = World(spec)
    assert world.call("get_user", {"id": 9}).error == "user 9 does not exist"
    assert world.call("create_ticket", {"user_id": 7, "subject": "y"}).content == {
        "ticket_id": 1,
        "state": "open",
    }
    assert world.call("search_products", {"query": "lamp"}).content == []


# --- fidelity ----------------------------------------------------------------------------


def test_fidelity_is_one_when_every_shape_matches():
    report = fidelity(item_spec(), ITEM_OBSERVATION)
    assert (report.score, report.calls, report.mismatches) == (1.0, 2, [])
    assert json.loads(report.to_json()) == {"score": 1.0, "calls": 2, "mismatches": []}


def test_a_null_field_the_recording_lacks_counts_as_absent():
    spec = item_spec(result="SELECT name, price, [tags] AS tags, NULL AS stock FROM items")
    assert fidelity(spec, ITEM_OBSERVATION).score == 1.0


@pytest.mark.parametrize(
    ("spec", "score", "line"),
    [
        (
            item_spec(result="SELECT name, [tags] AS tags FROM items"),
            (2 / 3 + 1) / 2,
            "get_item(item_id='L-1'): missing fields price",
        ),
        (
            item_spec(price="text"),  # the seed's 12.5 is stored as '12.5'
            (2 / 3 + 1) / 2,
            "get_item(item_id='L-1'): price is string, recorded number",
        ),
        (
            item_spec(result="SELECT name, NULL AS price, [tags] AS tags FROM items"),
            (2 / 3 + 1) / 2,
            "get_item(item_id='L-1'): price is null, recorded number",
        ),
        (
            item_spec(checked=False),
            0.5,
            "get_item(item_id='Q-9'): succeeded, recorded an error",
        ),
        (
            item_spec(result="SELECT name, price, [tags] AS tags, 1 AS stock FROM items"),
            (3 / 4 + 1) / 2,
            "get_item(item_id='L-1'): extra fields stock",
        ),
    ],
    ids=["missing_field", "type_differs", "null_field", "error_succeeds", "extra_field"],
)
def test_fidelity_drops_with_each_shape_difference(spec, score, line):
    report = fidelity(spec, ITEM_OBSERVATION)
    assert report.score == pytest.approx(score)
    assert report.mismatches == [line]


def test_fidelity_of_a_world_lacking_the_tool_or_failing_to_start():
    other = ObservedCall("get_price", {"item_id": "L-1"}, '{"price": 1}', "t1")
    observation = Observation("k", [], [[*ITEM_CALLS, other]], ["t1"])
    report = fidelity(item_spec(), observation)
    assert report.score == pytest.approx(2 / 3)
    assert report.mismatches == ["get_price(item_id='L-1'): no such tool in the world"]
    broken = item_spec().model_copy(update={"seed": {"items": [{"item_id": None}]}})
    report = fidelity(broken, ITEM_OBSERVATION)
    assert report.score == 0.0 and "the world does not start" in report.mismatches[0]
    assert fidelity(item_spec(), Observation("k", [], [], [])).score == 0.0


@pytest.mark.parametrize(
    ("text", "failed"),
    [
        ('{"error": "no order 5"}', True),
        ('{"error": null, "status": "ok"}', False),
        ('{"status": "failed"}', False),  # only an `error` entry makes a JSON result an error
        ("Order not found.", True),
        ('"no such order"', True),
        ("Invalid order id", True),
        ("Refund approved.", False),
        ("[]", False),
    ],
)
def test_which_recorded_results_count_as_errors(text, failed):
    assert recorded_error(text) is failed


# --- the generator model's spec ----------------------------------------------------------


def test_write_spec_returns_the_models_spec_under_the_drafts_name():
    observation = support_observation()
    draft = draft_spec(observation, "support_desk")
    written = item_spec().model_dump(mode="json")
    llm = ScriptedLLM(lambda role, messages, params: json.dumps(written))
    spec = asyncio.run(write_spec(observation, draft, llm, feedback="lookup_order(...): x"))
    assert spec == WorldSpec.model_validate({**written, "name": "support_desk"})
    [(role, messages, params)] = llm.requests
    assert role == "generator" and params["response_format"] == {"type": "json_object"}
    shown = messages[-1]["content"]
    assert '"tracking_number": "DC5510233"' in shown  # a recorded result
    assert '"name": "support_desk"' in shown and "lookup_order(...): x" in shown


def test_write_spec_asks_again_then_raises_a_clear_error_on_garbage():
    observation = support_observation()
    draft = draft_spec(observation, "support_desk")
    garbage = ScriptedLLM(lambda role, messages, params: "here is your world!")
    with pytest.raises(LLMError) as raised:
        asyncio.run(write_spec(observation, draft, garbage))
    assert raised.value.reason == "invalid_world_spec" and "invalid JSON" in raised.value.detail
    assert len(garbage.requests) == 2  # the reply, then one repair
    assert "not a valid world spec" in garbage.requests[1][1][-1]["content"]

    not_a_spec = ScriptedLLM(lambda role, messages, params: '{"tables": {}, "tools": []}')
    with pytest.raises(LLMError, match="invalid_world_spec: tables"):
        asyncio.run(write_spec(observation, draft, not_a_spec, repairs=0))

    replies = iter(["{", json.dumps(item_spec().model_dump(mode="json"))])
    repaired = ScriptedLLM(lambda role, messages, params: next(replies))
    assert asyncio.run(write_spec(observation, draft, repaired)).tools[0].name == "get_item"


# --- determinism -------------------------------------------------------------------------


def test_the_same_traces_give_the_same_key_draft_and_score():
    traces = sample_traces()
    first, again = observe(traces), observe(list(reversed(traces)))
    assert [o.key for o in first] == [o.key for o in again]
    drafts = [draft_spec(o[0], "support_desk") for o in (first, again)]
    assert drafts[0] == drafts[1] and drafts[0].world_id == drafts[1].world_id
    reports = [fidelity(d, o[0]) for d, o in zip(drafts, (first, again), strict=True)]
    assert reports[0].to_json() == reports[1].to_json()
