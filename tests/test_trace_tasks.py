"""Tasks from traces: rating, the three generators, their verifiers, the replay harness, and
the whole path from sample traces to an exported taskset without a planted secret."""

from __future__ import annotations

import asyncio
import json

import pytest

from data.export import export_taskset, read_tasks
from data.lake import RecordedCall, ToolCall, ToolEnvironment, ToolSpec, Trace, TraceMessage
from data.traces import ingest_traces
from families import export_kinds, kinds_running
from families.trace_stages import TRACE_TASKS
from generators.checks import CheckFailure
from generators.trace_tasks import (
    check_items,
    key_arguments,
    near_miss_task,
    prompt_of,
    recorded_calls,
    replay_task,
)
from harnesses.tool_replay import NO_RESULT, ToolReplay, attempt_text, replay, same_value
from judges import tool_calls
from judges.selfcheck import self_check
from sources import groupings
from tests.conftest import endpoints_for, make_context, run_llm_stages
from tests.exported_files import machine_paths_in, this_machines_paths
from tests.fakes.scripted_llm import ScriptedLLM
from tests.test_traces import PLANTED, SAMPLE_TRACES

REFUND = ToolSpec(
    name="create_refund",
    parameters={
        "properties": {
            "order_id": {"type": "string"},
            "amount": {"type": "number"},
            "reason": {"type": "string"},
            "kind": {"type": "string", "enum": ["full", "partial"]},
        }
    },
)


def refund_trace(result: str = '{"refund_id": "RF-1", "status": "approved"}') -> Trace:
    call = ToolCall(
        name="create_refund",
        arguments={"order_id": "ORD-1", "amount": 39.9, "reason": "arrived broken", "kind": "full"},
        call_id="c1",
    )
    messages = [
        TraceMessage(role="system", content="You help customers."),
        TraceMessage(role="user", content="Refund ORD-1 please, it arrived broken."),
        TraceMessage(role="assistant", content="", tool_calls=[call]),
        TraceMessage(role="tool", content=result, tool_call_id="c1"),
        TraceMessage(role="assistant", content="Refunded 39.90 for ORD-1 (refund RF-1)."),
    ]
    return Trace(
        trace_id="t1",
        origin="x.jsonl:1",
        format="openai",
        model="m",
        messages=messages,
        tools=[REFUND],
        request=messages[1].content,
        answer=messages[-1].content,
        scrubbed={},
        embedding=[],
        ingested_at="2026-11-30T00:00:00Z",
    )


# --- tool replay -------------------------------------------------------------------------


def test_replay_task_keeps_key_arguments_and_recorded_results():
    task = replay_task(refund_trace(), "gen")
    [expected] = task.verifier.tool_calls
    assert expected.arguments == {"order_id": "ORD-1", "amount": 39.9, "kind": "full"}
    assert task.environment.recorded[0].result.startswith('{"refund_id"')
    assert [m.role for m in task.prompt] == ["system", "user"]
    assert asyncio.run(self_check(task, ScriptedLLM(lambda *_: ""))) is None


def test_a_failed_tool_call_makes_no_replay_task():
    with pytest.raises(CheckFailure, match="a_tool_call_failed"):
        replay_task(refund_trace('{"error": "order not found"}'), "gen")


def test_tool_call_grading_order_values_and_spam():
    spec = replay_task(refund_trace(), "gen").verifier.model_copy(
        update={
            "tool_calls": [
                ToolCall(name="lookup_order", arguments={"order_id": "ORD-1"}),
                ToolCall(name="create_refund", arguments={"order_id": "ORD-1", "amount": 39.9}),
            ]
        }
    )
    lookup = ToolCall(name="lookup_order", arguments={"order_id": " ord-1 "})
    refund = ToolCall(name="create_refund", arguments={"order_id": "ORD-1", "amount": "39.90"})
    assert tool_calls.grade(spec, attempt_text([lookup, refund])).reward == 1.0
    assert tool_calls.grade(spec, attempt_text([refund, lookup])).reward == 0.5  # order matters
    wrong = refund.model_copy(update={"arguments": {"order_id": "ORD-1", "amount": 40}})
    assert tool_calls.grade(spec, attempt_text([lookup, wrong])).reward == 0.5
    assert tool_calls.grade(spec, attempt_text([lookup] * 4 + [refund])).reward == 0.0
    assert tool_calls.grade(spec, "Refunded!").why == "not a tool-replay attempt"


def test_key_arguments_leave_out_free_text():
    call = ToolCall(name="f", arguments={"id": "A-1", "n": 2, "note": "please hurry up"})
    assert key_arguments(call, None) == {"id": "A-1", "n": 2}


def test_recorded_calls_pair_results_by_id_then_position():
    trace = refund_trace()
    assert [r.result for r in recorded_calls(trace.messages)] == [trace.messages[3].content]


def refund_environment() -> ToolEnvironment:
    """The refund tool with one recorded call: ORD-1 approved (its key argument, the order)."""
    return ToolEnvironment(
        tools=[REFUND],
        recorded=[
            RecordedCall(
                call=ToolCall(name="create_refund", arguments={"order_id": "ORD-1"}),
                result="approved",
                key_arguments={"order_id": "ORD-1"},
            )
        ],
    )


def test_replay_answers_recorded_calls_only():
    environment = refund_environment()
    asked = ToolCall(name="create_refund", arguments={"order_id": "ord-1", "reason": "any"})
    assert replay(environment, asked, set()) == "approved"
    other = ToolCall(name="create_refund", arguments={"order_id": "ORD-2"})
    assert replay(environment, other, set()) == NO_RESULT


def test_replay_of_free_text_calls_follows_arguments_then_order():
    searches = [
        RecordedCall(call=ToolCall(name="search", arguments={"query": q}), result=r)
        for q, r in (("refund policy", "30 days"), ("opening hours", "9 to 5"))
    ]
    environment = ToolEnvironment(tools=[], recorded=searches)
    used: set[int] = set()
    ask = ToolCall(name="search", arguments={"query": "Opening  hours"})
    assert replay(environment, ask, used) == "9 to 5"
    vague = ToolCall(name="search", arguments={"query": "anything"})
    assert replay(environment, vague, used) == "30 days"  # not yet replayed comes first


def test_ids_compare_digit_for_digit_amounts_by_value():
    assert not same_value("1234567890123", "1234567890124")
    assert not same_value("02134", 2134)
    assert same_value("39.90", 39.9) and same_value("1,000.50", 1000.5)


def test_replay_harness_episode_makes_calls_then_answers():
    task = replay_task(refund_trace(), "gen")
    turns = iter(
        [
            "not json",
            json.dumps(
                {
                    "tool": "create_refund",
                    "arguments": {"order_id": "ORD-1", "amount": 39.9, "kind": "full"},
                }
            ),
            json.dumps({"tool": "answer", "answer": "Refunded."}),
        ]
    )
    seen = []

    def respond(role, messages, params):
        seen.append(messages[-1]["content"])
        return next(turns)

    [reply] = asyncio.run(
        ToolReplay().attempt(
            task, ScriptedLLM(respond), ["r1"], temperature=0, max_tokens=64, seed=1
        )
    )
    assert seen[1].startswith("That is not a valid action")
    assert seen[2] == "Result: " + task.environment.recorded[0].result
    assert tool_calls.grade(task.verifier, reply.text).reward == 1.0
    assert json.loads(reply.text)["answer"] == "Refunded."


# --- reference and near-miss tasks --------------------------------------------------------


def test_prompt_writes_tool_calls_and_results_into_assistant_messages():
    prompt = prompt_of(refund_trace().messages[:-1])
    assert [m.role for m in prompt] == ["system", "user", "assistant"]
    assert prompt[-1].content.startswith("[calls create_refund {")
    assert "[result] " in prompt[-1].content


def test_check_items_drops_fragments_and_duplicates():
    items = check_items(["ok", "Names the refund id", "names the refund  id", "{junk json here}"])
    assert items == ["Names the refund id"]
    with pytest.raises(CheckFailure, match="no_usable_rubric_item"):
        check_items(["x", "y z"])


def test_near_miss_keeps_the_failed_reply_as_a_negative_the_verifier_rejects():
    trace = refund_trace()
    draft = {"answer": "Refunded 39.90 for ORD-1; refund RF-1.", "items": ["states the refund id"]}
    llm = ScriptedLLM(lambda role, messages, params: json.dumps(draft))
    task = asyncio.run(near_miss_task(trace, ["no refund id given"], llm))
    assert task.verifier.negatives == [trace.answer] and task.verifier.type == "rubric"
    assert task.lineage.knobs["failure"] == "no refund id given"

    def judge(accept_negative: bool):
        def respond(role, messages, params):
            reply = messages[-1]["content"].split("<reply>\n", 1)[1]
            meets = reply.startswith("Refunded 39.90 for ORD-1;") or accept_negative
            return json.dumps({"meets_all": meets, "reason": "r"})

        return ScriptedLLM(respond)

    assert asyncio.run(self_check(task, judge(False))) is None
    assert asyncio.run(self_check(task, judge(True))) == "negative 1 accepted"


# --- end to end ----------------------------------------------------------------------------


def test_sample_traces_to_an_exported_taskset_without_a_planted_secret(tmp_path, oracle_server):
    home = tmp_path / "home"
    ctx = make_context(home, calibrate={"k": 4})
    ingest_traces([str(SAMPLE_TRACES)], ctx.lake, ctx.config.traces, ctx.run_id, lambda m: None)
    run_llm_stages(ctx, endpoints_for(oracle_server))
    result = export_taskset(
        ctx.lake, "traces", home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )

    rows = read_tasks(result.path).to_pylist()
    kinds = {r["kind"] for r in rows}
    assert kinds == {"trace_answer", "near_miss", "tool_replay", "world_tool_use"}
    traced = [r for r in rows if r["kind"] != "world_tool_use"]  # worlds: planted from traces
    assert all(r["trace_id"] and r["intent"] and 0 < r["intent_share"] <= 1 for r in traced)
    replay_row = next(r for r in rows if r["kind"] == "tool_replay")
    assert json.loads(replay_row["environment"])["recorded"]
    checks = {c["check"] for r in rows for c in json.loads(r["consensus"])}
    assert checks == {"trace_outcome", "instruction"}  # world tasks: their instruction judged
    # nothing planted in the samples reaches the taskset, its manifest or its card
    exported = json.dumps(rows, default=str) + "".join(
        p.read_text() for p in result.path.iterdir() if p.suffix in (".json", ".md")
    )
    assert [p for p in PLANTED if p in exported] == []
    assert "[EMAIL]" in exported or "[PHONE]" in exported  # scrubbed, not dropped
    assert machine_paths_in(result.path, this_machines_paths(SAMPLE_TRACES, home)) == {}
    # ... nor any prompt a model was sent
    sent = json.dumps(oracle_server.requests)
    assert [p for p in PLANTED if p in sent] == []


# --- the trainer-facing reward function ----------------------------------------------------


def test_verifier_reward_reads_the_exported_taskset_as_trl_would(tmp_path, oracle_server):
    from datasets import concatenate_datasets, load_dataset

    from judges.verifier_types.trainer_rewards import verifier_reward

    home = tmp_path / "home"
    ctx = make_context(home, calibrate={"k": 2}, scope={"kinds": list(kinds_running(TRACE_TASKS))})
    ingest_traces([str(SAMPLE_TRACES)], ctx.lake, ctx.config.traces, ctx.run_id, lambda m: None)
    run_llm_stages(ctx, endpoints_for(oracle_server))
    result = export_taskset(
        ctx.lake, "traces", home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    splits = load_dataset(str(result.path))
    rows = concatenate_datasets([splits["train"], splits["eval"]])
    columns = {name: rows[name] for name in rows.column_names if name != "prompt"}
    # the gold answers as conversational completions score 1 where no model is needed
    golds = [[{"role": "assistant", "content": a}] for a in rows["answer"]]
    rewards = verifier_reward(rows["prompt"], golds, **columns)
    for kind, reward in zip(rows["kind"], rewards, strict=True):
        assert reward == (1.0 if kind == "tool_replay" else None)
    empty = verifier_reward(rows["prompt"], [""] * len(rows), **columns)
    assert {r for k, r in zip(rows["kind"], empty, strict=True) if k == "tool_replay"} == {0.0}
