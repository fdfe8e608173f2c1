"""Planted tool-use tasks: planting, instructions, the ladder, repair variants, and the whole
path from bundled worlds and sample traces to an exported taskset a trainer can score."""

from __future__ import annotations

import asyncio
import functools
import json
import random
from pathlib import Path

import pytest

from data.config import WorldsConfig
from data.export import export_taskset, project, read_tasks
from data.traces import ingest_traces
from families import export_kinds
from generators import world_tasks
from generators.checks import CheckFailure
from generators.world_plant import description, named_records, plant_distractors
from generators.world_tasks import Candidate, LoadedWorld, instruction_problem
from harnesses.tool_replay import attempt_text
from harnesses.world import World, load_world_spec, world_spec
from harnesses.world_check import self_check
from harnesses.world_replay import gold_calls
from judges import world_state
from judges.verifier_types import package_graders
from judges.verifier_types.trainer_rewards import verifier_reward
from sources import groupings
from sources.worlds import ingest_world_files
from tests.conftest import endpoints_for, make_context, run_llm_stages
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM
from tests.test_traces import SAMPLE_TRACES

WORLDS = Path(__file__).resolve().parent.parent / "data" / "samples" / "worlds"
SHOP = WORLDS / "outdoor_shop.toml"
TRAVEL = WORLDS / "travel_agency.toml"


def loaded(path: Path) -> LoadedWorld:
    spec = load_world_spec(path)
    return LoadedWorld(spec.world_id, f"file:{path}", spec)


def seed_state(spec):
    world = World(spec)
    try:
        return world.snapshot()
    finally:
        world.close()


@functools.cache
def generated(path: Path, level: str = "base") -> list:
    """The candidates of `generate` (made once per world and level in this session)."""
    return generate(path, level)


def generate(path: Path, level: str = "base", n: int = 4) -> list:
    oracle = Oracle()
    llm = ScriptedLLM(oracle.respond, roles=["generator"])
    return asyncio.run(
        world_tasks.generate(loaded(path), llm, WorldsConfig(tasks_per_world=n), level)
    )


def gold_text(task) -> str:
    calls = [c.model_copy(update={"call_id": ""}) for c in task.verifier.tool_calls]
    return attempt_text(calls, task.answer)


def test_distractors_are_siblings_under_the_same_parent_with_new_keys():
    spec = load_world_spec(TRAVEL)
    initial = seed_state(spec)
    calls = [("cancel_booking", {"booking_id": 4})]
    planted = plant_distractors(spec, initial, calls, 2, random.Random(1))
    original = next(r for r in initial["bookings"] if r["booking_id"] == 4)
    added = [r for r in planted["bookings"] if r not in initial["bookings"]]
    assert len(added) == 2 and len({r["booking_id"] for r in planted["bookings"]}) == 8 + 2
    assert all(r["customer_id"] == original["customer_id"] for r in added)  # the same customer
    assert all(r["booking_id"] not in {b["booking_id"] for b in initial["bookings"]} for r in added)
    assert initial["bookings"] == [r for r in planted["bookings"] if r not in added]
    # customers and flights have no parent: no confusing copies of them
    assert planted["customers"] == initial["customers"] and planted["flights"] == initial["flights"]
    # the gold call still passes its self-check among the distractors
    assert self_check(spec, planted, calls) is None


def test_a_record_is_described_by_a_value_a_tool_finds_it_by():
    spec = load_world_spec(SHOP)
    initial = seed_state(spec)
    [customer] = named_records(spec, initial, [("list_orders", {"customer_id": "C-1002"})])
    # the name is unique too, but only find_customer(email) can turn a value into the id
    assert description(spec, initial, customer) == [
        ("customers C-1002 as email oskar@example.test", "oskar@example.test")
    ]
    # no tool finds orders by date, but list_orders lists a customer's: the date among them
    [order] = named_records(spec, initial, [("cancel_order", {"order_id": 88213})])
    assert [value for _, value in description(spec, initial, order)] == [
        "2026-11-09",
        "maren@example.test",
    ]
    # nothing finds a product but its sku: it cannot be described
    [product] = named_records(spec, initial, [("check_stock", {"sku": "LAMP-H3"})])
    assert description(spec, initial, product) == []


def test_planted_tasks_pass_their_gold_and_fail_a_no_op_on_each_bundled_world():
    for path in (SHOP, TRAVEL):
        results = generated(path)
        tasks = [r.task for r in results if isinstance(r, Candidate)]
        assert len(tasks) == 4, results
        for task in tasks:
            assert task.kind == "world_tool_use" and task.verifier.type == "world_state"
            assert world_state.task_self_check(task) is None
            assert world_state.grade(task, gold_text(task)).reward == 1.0
            assert world_state.grade(task, attempt_text([], "")).reward == 0.0
            assert instruction_problem(task.question, _plan_values(task)) is None
            assert task.world.tools[0]["type"] == "function"
            assert task.lineage.knobs["level"] == "base" and task.lineage.knobs["distractors"] == 2
        assert len({t.task_id for t in tasks}) == 4
    again = [r.task.task_id for r in generate(TRAVEL) if isinstance(r, Candidate)]
    assert again == [t.task_id for t in tasks]  # seeded: the same tasks every time


def _plan_values(task):
    """The values the base level makes an instruction state: every non-boolean argument."""
    values = []
    for call in task.verifier.tool_calls:
        for value in call.arguments.values():
            if not isinstance(value, bool):
                values.append(value if isinstance(value, str) else json.dumps(value))
    return world_tasks.Plan([], {}, {}, "", "", values, [task.answer] if task.answer else [], [])


def test_an_instruction_must_state_the_values_and_hide_the_answer():
    plan = world_tasks.Plan(
        [], {}, {}, "delivered", "status", ["88213", "POLE-TR"], ["delivered"], []
    )
    assert instruction_problem("Return one POLE-TR from order 88213.", plan) is None
    assert "must state '88213'" in instruction_problem("Return one POLE-TR please.", plan)
    leaked = instruction_problem("Order 88213 (delivered): return one POLE-TR.", plan)
    assert "must not state 'delivered'" in leaked


def test_an_instruction_that_never_fits_is_rejected_with_its_reason():
    llm = ScriptedLLM(lambda *_: json.dumps({"instruction": "Do the thing."}), roles=["generator"])
    results = asyncio.run(world_tasks.generate(loaded(SHOP), llm, WorldsConfig(tasks_per_world=2)))
    assert results and all(r.reason == "instruction_omits_value" for r in results)
    assert len(llm.requests) == 2 * len(results)  # told what was missing, tried once more
    assert "must state" in llm.requests[1][1][0]["content"]


def test_harder_levels_hide_keys_and_chain_steps():
    described = [r.task for r in generated(SHOP, "described") if isinstance(r, Candidate)]
    assert described
    for task in described:
        spec, calls = world_spec(task), gold_calls(task)
        named = named_records(spec, task.world.initial, calls)
        assert any(str(n.value) not in task.question for n in named)  # looked up, not given
    chained = [r.task for r in generated(SHOP, "two_steps") if isinstance(r, Candidate)]
    assert chained and all(len(t.verifier.tool_calls) == 2 for t in chained)
    for task in chained:
        assert world_state.task_self_check(task) is None
        half = attempt_text(task.verifier.tool_calls[1:], task.answer)
        assert world_state.grade(task, half).reward == 0.0  # the first step left out: not enough


def test_a_repair_variant_moves_one_level_and_keeps_the_goal():
    task = next(r.task for r in generated(SHOP) if isinstance(r, Candidate))
    llm = ScriptedLLM(Oracle().respond, roles=["generator"])
    level = world_tasks.LADDER.level("guided")
    easier = asyncio.run(world_tasks.make_variant(task, level, "easier", llm, WorldsConfig()))
    assert easier.verifier.tool_calls == task.verifier.tool_calls
    assert easier.lineage.repair.parent == task.task_id
    assert easier.lineage.knobs["distractors"] == 0 and easier.task_id != task.task_id
    assert world_state.task_self_check(easier) is None
    silent = ScriptedLLM(lambda *_: json.dumps({"instruction": "Hello."}), roles=["generator"])
    with pytest.raises(CheckFailure, match="instruction_omits_value"):
        asyncio.run(world_tasks.make_variant(task, level, "easier", silent, WorldsConfig()))


def test_a_broken_world_spec_is_recorded_with_its_reason(tmp_path):
    ctx = make_context(tmp_path / "home")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "broken.toml").write_text('name = "x"\n[tables.t]\ncolumns = {}\n')
    (tmp_path / "specs" / "garbled.json").write_text("{not json")
    twice = {
        "name": "twice",
        "tables": {"t": {"columns": {"k": "text"}, "key": ["k"]}},
        "seed": {"t": [{"k": "a"}, {"k": "a"}]},  # valid, but the key repeats
        "tools": [{"name": "get", "description": "d", "result": "SELECT * FROM t"}],
    }
    (tmp_path / "specs" / "twice.json").write_text(json.dumps(twice))
    counts = ingest_world_files([str(WORLDS), str(tmp_path / "specs")], ctx)
    assert counts == {
        "done:ingested": 2,
        "rejected:invalid_world_spec": 2,
        "rejected:world_does_not_start": 1,
    }
    reasons = ctx.lake.rows(
        "SELECT item_id, detail FROM status WHERE stage = 'ingest_worlds' AND status = 'rejected'"
    )
    assert {Path(r["item_id"]).name for r in reasons} == {
        "broken.toml",
        "garbled.json",
        "twice.json",
    }
    assert all(r["detail"] for r in reasons)
    ingest_world_files([str(WORLDS)], ctx)  # ingested again: stored once
    assert ctx.lake.rows("SELECT count(*) AS n FROM worlds")[0]["n"] == 2


def test_worlds_and_traces_to_an_exported_taskset_a_trainer_scores(tmp_path, oracle_server):
    home = tmp_path / "home"
    ctx = make_context(
        home,
        calibrate={"k": 2, "method": "fixed"},
        worlds={"tasks_per_world": 2},
        repair={"max_steps": 0},
    )
    ingest_world_files([str(WORLDS)], ctx)
    ingest_traces([str(SAMPLE_TRACES)], ctx.lake, ctx.config.traces, ctx.run_id, lambda m: None)
    run_llm_stages(ctx, endpoints_for(oracle_server))

    built = ctx.lake.rows("SELECT * FROM worlds WHERE origin LIKE 'traces:%' ORDER BY world_id")
    assert built and all(0 < w["fidelity"] <= 1 and w["fidelity_report"] for w in built)
    outcomes = ctx.lake.rows("SELECT reason, detail FROM status WHERE stage = 'trace_worlds'")
    assert outcomes and all("fidelity" in o["detail"] for o in outcomes)
    verified = ctx.lake.rows(
        "SELECT s.reason FROM status s JOIN tasks t ON t.task_id = s.item_id"
        " WHERE s.stage = 'verify' AND t.kind = 'world_tool_use'"
    )
    assert len(verified) >= 4 and {v["reason"] for v in verified} == {"accepted"}
    judged = ctx.lake.rows("SELECT decision FROM consensus WHERE \"check\" = 'instruction'")
    assert len(judged) == len(verified) and {j["decision"] for j in judged} == {"pass"}
    attempts = ctx.lake.rows(
        "SELECT harness, reward FROM attempts a JOIN tasks t USING (task_id)"
        " WHERE t.kind = 'world_tool_use'"
    )
    assert {a["harness"] for a in attempts} == {"world_tools"}
    assert {a["reward"] for a in attempts} == {0.0, 1.0}  # the oracle solves on even seeds
    rollouts = ctx.lake.rows(
        "SELECT count(*) AS n FROM proxy_calls WHERE params LIKE '%\"tools\"%'"
    )
    assert rollouts[0]["n"] > 0  # every turn went through the recording proxy

    result = export_taskset(
        ctx.lake, "worlds", home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    rows = [r for r in read_tasks(result.path).to_pylist()]
    worlds = [r for r in rows if r["kind"] == "world_tool_use"]
    assert worlds and all(r["world"] and json.loads(r["tools"]) for r in worlds)
    ids = {json.loads(r["world"])["world_id"].split("@")[0] for r in worlds}
    assert {"outdoor_shop", "travel_agency"} <= ids
    package = project(
        result.path, "verifiers", ctx.lake, graders=package_graders()
    )  # the v1 package keeps world tasks
    assert not any("world" in reason for reason in package.skipped), package.skipped
    readme = (package.path / "taskset" / "README.md").read_text()
    assert f"| world_tool_use | world | {len(worlds)} |" in readme
    columns = {
        "verifier": [r["verifier"] for r in worlds],
        "solution": [r["answer"] for r in worlds],
        "world": [r["world"] for r in worlds],
    }
    prompts = [r["prompt"] for r in worlds]
    golds = [_gold_conversation(r) for r in worlds]
    assert verifier_reward(prompts, golds, **columns) == [1.0] * len(worlds)
    idle = [[{"role": "assistant", "content": "Done."}]] * len(worlds)
    assert verifier_reward(prompts, idle, **columns) == [0.0] * len(worlds)


def _gold_conversation(row) -> list[dict]:
    """The gold calls as a trainer's conversational completion, then the answer."""
    calls = json.loads(row["verifier"])["tool_calls"]
    requested = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
            for c in calls
        ],
    }
    return [requested, {"role": "assistant", "content": row["answer"] or "Done."}]


def test_low_fidelity_trace_worlds_are_rejected_with_the_mismatches(tmp_path, oracle_server):
    ctx = make_context(
        tmp_path / "home",
        worlds={"min_fidelity": 1.0, "refine_rounds": 0},
        scope={"kinds": ["world_tool_use"]},
    )
    ingest_traces([str(SAMPLE_TRACES)], ctx.lake, ctx.config.traces, ctx.run_id, lambda m: None)
    run_llm_stages(ctx, endpoints_for(oracle_server))
    rejected = ctx.lake.rows(
        "SELECT detail FROM status WHERE stage = 'trace_worlds' AND reason = 'low_fidelity'"
    )
    assert rejected and all("fidelity 0." in r["detail"] for r in rejected)
    low = ctx.lake.rows("SELECT world_id FROM worlds WHERE fidelity < 1.0")
    planted_on = ctx.lake.rows("SELECT DISTINCT source FROM tasks")
    assert low and not any(w["world_id"] in r["source"] for w in low for r in planted_on)


def test_a_question_after_changes_is_answered_from_the_changed_state():
    spec = load_world_spec(SHOP)
    initial = seed_state(spec)
    give_back = world_tasks.Goal(
        "change",
        [("create_return", {"order_id": 88213, "sku": "POLE-TR", "qty": 1, "opened": True})],
    )
    stale = world_tasks.Goal("question", [("check_stock", {"sku": "POLE-TR"})], "9", "stock")
    level = world_tasks.LADDER.level("guided")
    plan = world_tasks._plan(spec, initial, [give_back, stale], level, random.Random(0))
    assert plan.answer == "10"  # 9 in stock before the return, 10 after it
