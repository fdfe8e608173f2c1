"""Simulated tool worlds: specs, determinism, reset, failed calls, the sandboxed SQL."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError

from generators.world_goals import sample_goals
from harnesses.world import World, WorldSpec, load_world_spec
from harnesses.world_check import passes, self_check, wrong_variants
from harnesses.world_replay import replay, state_diff

WORLDS = Path(__file__).resolve().parent.parent / "data" / "samples" / "worlds"
SHOP = WORLDS / "outdoor_shop.toml"

# a session at the shop: lookups, a cancellation, a return with its fee, and failures between
SHOP_SESSION = [
    ("find_customer", {"email": "Maren@Example.test"}),
    ("list_orders", {"customer_id": "C-1001"}),
    ("get_order", {"order_id": 88213}),
    ("cancel_order", {"order_id": 88211}),  # delivered: refused
    ("cancel_order", {"order_id": 88212}),
    ("create_return", {"order_id": 88213, "sku": "POLE-TR", "qty": 1, "opened": True}),
    ("create_return", {"order_id": 88213, "sku": "POLE-TR", "qty": 2, "opened": False}),
    ("check_stock", {"sku": "POLE-TR"}),
]


def small_spec(**tool) -> WorldSpec:
    """A one-table world with one tool (`tool` over the defaults)."""
    return WorldSpec.model_validate(
        {
            "name": "counter",
            "tables": {"counts": {"columns": {"name": "text", "n": "integer"}, "key": ["name"]}},
            "seed": {"counts": [{"name": "a", "n": 1}]},
            "tools": [{"name": "bump", "description": "Add one.", **tool}],
        }
    )


@pytest.mark.parametrize("path", sorted(WORLDS.glob("*.toml")), ids=lambda p: p.stem)
def test_each_bundled_world_loads_with_openai_tools(path):
    spec = load_world_spec(path)
    assert 4 <= len(spec.tools) <= 8 and spec.seed
    for tool in spec.openai_tools():
        assert tool["type"] == "function" and tool["function"]["description"]
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])
    world = World(spec)
    assert set(world.snapshot()) == set(spec.tables)
    assert spec.world_id == load_world_spec(path).world_id  # stable: a hash of the spec


def test_the_same_calls_give_the_same_results_and_state():
    spec = load_world_spec(SHOP)
    runs = []
    for _ in range(2):
        world = World(spec)
        results = [world.call(name, args) for name, args in SHOP_SESSION]
        runs.append(([r.message() for r in results], world.snapshot()))
    assert runs[0] == runs[1]
    messages, state = runs[0]
    assert '"status": "cancelled"' in messages[4] and "can no longer be cancelled" in messages[3]
    assert '"refund_cents": 7565' in messages[5]  # 8900 less the 15% fee for an opened item
    assert "no 2 unreturned POLE-TR" in messages[6]  # one of the two is back already
    assert '"stock": 10' in messages[7]
    assert next(o for o in state["orders"] if o["order_id"] == 88212)["status"] == "cancelled"


def test_reset_restores_the_seed_or_a_snapshot():
    spec = load_world_spec(SHOP)
    world = World(spec)
    seed = world.snapshot()
    world.call("cancel_order", {"order_id": 88212})
    middle = world.snapshot()
    world.call("create_return", {"order_id": 88213, "sku": "POLE-TR", "qty": 1, "opened": False})
    assert world.snapshot() != middle
    world.reset(middle)
    assert world.snapshot() == middle
    assert World(spec, middle).snapshot() == middle  # a snapshot rebuilds a world
    world.reset()
    assert world.snapshot() == seed


def test_a_reset_to_the_same_snapshot_restores_whatever_changed_since():
    """A reset that finds the state as the same snapshot left it does nothing; each way the
    state can change in between is undone by the next reset."""
    bump = small_spec(effects=["UPDATE counts SET n = n + 1"])
    world, seed = World(bump), {"counts": [{"name": "a", "n": 1}]}
    world.reset()
    world.call("bump", {})  # a change
    world.reset()
    assert world.snapshot() == seed
    at_five = {"counts": [{"name": "a", "n": 5}]}
    world.reset(at_five)
    world.call("bump", {})
    world.reset(at_five)  # the same snapshot object again, after a change
    assert world.snapshot() == at_five
    world.call("bump", {})
    world.reset({"counts": [{"name": "a", "n": 5}]})  # an equal snapshot, another object
    assert world.snapshot() == at_five
    failing = small_spec(
        effects=["UPDATE counts SET n = n + 1", "INSERT INTO counts VALUES ('a', 0)"]
    )
    world = World(failing)
    assert not world.call("bump", {}).ok  # rolled back: nothing to undo
    world.reset()
    assert world.snapshot() == seed
    world.query("UPDATE counts SET n = 9")  # a verifier's query is not held to reading
    world.reset()
    assert world.snapshot() == seed


def test_a_failed_call_changes_nothing():
    spec = small_spec(
        effects=[
            "UPDATE counts SET n = n + 1",
            "INSERT INTO counts VALUES ('a', 0)",  # the key exists: the call fails here
        ],
        result="SELECT * FROM counts ORDER BY name",
    )
    world = World(spec)
    result = world.call("bump", {})
    assert not result.ok and "Constraint" in result.error
    assert world.snapshot() == {"counts": [{"name": "a", "n": 1}]}  # the first effect undone
    bump = small_spec(effects=["UPDATE counts SET n = n + 1"])
    assert World(bump).call("bump", {"extra": 1}).content == {"ok": True}  # an open object
    strict = {"type": "object", "properties": {}, "additionalProperties": False}
    refused = World(small_spec(parameters=strict)).call("bump", {"extra": 1})
    assert not refused.ok and refused.error.startswith("invalid arguments")
    assert World(spec).call("missing", {}).error == "unknown tool 'missing'"


def test_world_sql_cannot_reach_files():
    spec = small_spec(result="SELECT * FROM read_csv('/etc/hostname')")
    result = World(spec).call("bump", {})
    assert not result.ok and "Permission" in result.error


@pytest.mark.parametrize(
    "tool, message",
    [
        ({"effects": ["CREATE SEQUENCE s"]}, "an effect must be one DELETE or INSERT or UPDATE"),
        ({"effects": ["COMMIT"]}, "not TRANSACTION"),
        ({"effects": ["SET threads = 1"]}, "not SET"),
        ({"effects": ["UPDATE counts SET n = 1; DELETE FROM counts"]}, "not DELETE, UPDATE"),
        ({"result": "ATTACH ':memory:' AS other"}, "the result must be one SELECT"),
        ({"checks": [{"sql": "DELETE FROM counts", "error": "x"}]}, "a check must be one SELECT"),
        ({"result": "SELEC 1"}, "does not parse"),
    ],
)
def test_spec_sql_is_held_to_its_tables(tool, message):
    with pytest.raises(ValidationError, match=message):
        small_spec(**tool)


def test_a_runaway_call_is_interrupted_and_changes_nothing(monkeypatch):
    monkeypatch.setattr("data.runtime.world_runtime.CALL_TIMEOUT_S", 0.2)
    spec = small_spec(
        effects=["UPDATE counts SET n = n + 1"],
        result="SELECT count(*) AS n FROM range(100000000000) a",
    )
    world = World(spec)
    result = world.call("bump", {})
    assert not result.ok and result.error == "the call ran longer than 0.2 s"
    assert world.snapshot() == {"counts": [{"name": "a", "n": 1}]}
    assert world.call("bump", {}).error  # still usable afterwards, and still interrupted


def test_nested_and_odd_values_come_back_as_json():
    result = (
        "SELECT [DATE '2026-01-02'] AS days, {'at': TIME '10:30:00'} AS s,"
        " 1.5::DECIMAL(4,2) AS d, INTERVAL 2 DAY AS i"
    )
    content = World(small_spec(result=result, returns="row")).call("bump", {}).content
    assert content == {
        "days": ["2026-01-02"],
        "s": {"at": "10:30:00"},
        "d": 1.5,
        "i": "2 days, 0:00:00",
    }


def test_a_world_with_randomness_fails_the_self_check():
    spec = small_spec(effects=["UPDATE counts SET n = (random() * 1000000)::INTEGER"])
    initial = World(spec).snapshot()
    assert self_check(spec, initial, [("bump", {})]) == "nondeterministic_world"


def test_replays_on_a_reused_world_start_from_their_own_state():
    spec = load_world_spec(WORLDS / "outdoor_shop.toml")
    initial = World(spec).snapshot()
    changed = replay(spec, initial, RETURN_GOLD).final
    assert replay(spec, initial, []).final == initial  # the reused world was reset
    assert replay(spec, changed, []).final == changed


@pytest.mark.parametrize(
    "change, message",
    [
        ({"tools": [{"name": "t", "description": "d"}] * 2}, "tool names repeat"),
        ({"seed": {"counts": [{"name": "a", "m": 1}]}}, "unknown columns"),
        ({"seed": {"other": []}}, "unknown table"),
        (
            {"tables": {"counts": {"columns": {"name": "text"}, "key": ["id"]}}},
            "are not columns",
        ),
        (
            {"tools": [{"name": "t", "description": "d", "parameters": {"type": "nothing"}}]},
            "is not valid",
        ),
        (
            {"tools": [{"name": "t", "description": "d", "result": "SELECT 1", "returns": "none"}]},
            "a result query",
        ),
    ],
)
def test_a_malformed_spec_is_refused_with_its_reason(change, message):
    raw = small_spec(effects=["UPDATE counts SET n = n + 1"]).model_dump()
    with pytest.raises((ValidationError, jsonschema.SchemaError), match=message):
        WorldSpec.model_validate({**raw, **change})


# --- the verifier of planted tasks: a predicate over the final state -----------------------

RETURN_GOLD = [
    ("find_customer", {"email": "maren@example.test"}),
    ("list_orders", {"customer_id": "C-1001"}),
    ("create_return", {"order_id": 88213, "sku": "POLE-TR", "qty": 1, "opened": True}),
]


def test_the_gold_state_passes_and_a_no_op_or_wrong_return_fails():
    spec = load_world_spec(SHOP)
    initial = World(spec).snapshot()
    gold = replay(spec, initial, RETURN_GOLD)
    assert gold.failed_calls == 0 and passes(gold.final, gold.final)
    assert not passes(initial, gold.final)  # doing nothing
    both = [*RETURN_GOLD[:2], ("create_return", {**RETURN_GOLD[2][1], "qty": 2})]
    assert not passes(replay(spec, initial, both).final, gold.final)  # the refund is off
    assert state_diff(initial, gold.final)["returns"] == {
        "removed": [],
        "added": [
            {
                "return_id": 2,
                "order_id": 88213,
                "sku": "POLE-TR",
                "qty": 1,
                "opened": True,
                "refund_cents": 7565,
            }
        ],
    }
    assert self_check(spec, initial, RETURN_GOLD) is None
    assert any(v[-1][1]["qty"] == 2 for v in wrong_variants(spec, initial, RETURN_GOLD))


def test_a_question_is_decided_by_its_answer():
    spec = load_world_spec(SHOP)
    initial = World(spec).snapshot()
    question = [("check_stock", {"sku": "TENT-2P"})]
    assert passes(initial, initial, "6", "6")  # the harness asks for the bare value
    assert not passes(initial, initial, "5", "6") and not passes(initial, initial, "", "6")
    assert self_check(spec, initial, question, "6") is None
    assert self_check(spec, initial, question) == "no_op_passes"  # no change, no answer


def test_self_check_refuses_tasks_it_cannot_trust():
    spec = load_world_spec(SHOP)
    initial = World(spec).snapshot()
    failed = self_check(spec, initial, [("cancel_order", {"order_id": 88211})])
    assert failed.startswith("gold_call_failed") and "can no longer be cancelled" in failed
    assert self_check(spec, initial, [("cancel_order", {"order_id": 88212})]) is None
    bump = small_spec(effects=["UPDATE counts SET n = n + 1"])  # no argument to get wrong
    counter = World(bump).snapshot()
    assert self_check(bump, counter, [("bump", {})]) == "no_plausible_wrong_sequence"


def test_travel_agency_cancellation_refunds_all_but_the_fee():
    spec = load_world_spec(WORLDS / "travel_agency.toml")
    initial = World(spec).snapshot()
    gold = [("list_bookings", {"customer_id": "C001"}), ("cancel_booking", {"booking_id": 1})]
    done = replay(spec, initial, gold)
    diff = state_diff(initial, done.final)
    assert [r["amount_cents"] for r in diff["refunds"]["added"]] == [25998 - 2599]
    seats = {r["flight_no"]: r["seats_left"] for r in diff["flights"]["added"]}
    assert seats == {"GW101": 14 + 2}
    again = replay(spec, done.final, [("cancel_booking", {"booking_id": 1})])
    assert again.failed_calls == 1 and again.final == done.final  # cancelling twice
    assert self_check(spec, initial, gold) is None


@pytest.mark.parametrize("path", sorted(WORLDS.glob("*.toml")), ids=lambda p: p.stem)
def test_goals_are_worked_back_from_the_state_and_pass_the_self_check(path):
    spec = load_world_spec(path)
    initial = World(spec).snapshot()
    goals = sample_goals(spec, initial, 6, seed=3)
    assert goals == sample_goals(spec, initial, 6, seed=3)  # seeded
    assert {g.kind for g in goals} == {"change", "question"} and len(goals) == 6
    for goal in goals:
        assert self_check(spec, initial, goal.calls, goal.answer) is None
        done = replay(spec, initial, goal.calls)
        assert done.failed_calls == 0
        assert (done.final != initial) == (goal.kind == "change")
        if goal.kind == "question":
            assert goal.answer and goal.answer in done.messages[-1]


def test_a_dollar_word_in_a_sql_string_or_comment_is_not_a_parameter():
    spec = small_spec(
        effects=["UPDATE counts SET n = n + $by WHERE name = $name OR name = 'priced in $usd'"],
        result="SELECT n FROM counts WHERE name = $name -- not $this",
        returns="row",
    )
    outcome = World(spec).call("bump", {"name": "a", "by": 2})
    assert outcome.content == {"n": 3}
