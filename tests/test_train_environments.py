"""The environments a policy trains in (TRL's `environment_factory`): each family's tools as the
calibration harness offered them, the same results for the same calls, a call budget, the tool
schemas the chat template shows, the gold episodes of the warm start, and the episodes written
as recording-proxy records that `foundry ingest traces` reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from transformers.utils import get_json_schema

from data.lake import Lake, ToolCall, ToolEnvironment, WorldSetup
from data.runtime.corpus_index import CorpusIndex
from data.runtime.world_runtime import World, WorldSpec, load_world_spec
from data.traces import read_proxy_records
from harnesses.tool_replay import NO_RESULT, replay
from harnesses.train_environments import (
    TOO_MANY_CALLS,
    environments_for,
    replay_environment,
    search_environment,
    tool_method,
    tool_schemas,
    tools_of,
    training_of,
    world_environment,
)
from harnesses.train_episodes import EpisodeRecorder, openai_messages
from harnesses.warm_start import gold_episode, warm_start_rows
from judges.verifier_types.trainer_rewards import verifier_reward
from tests.test_doc_search import CHUNKS
from tests.test_trace_tasks import REFUND, refund_environment

SHOP = Path(__file__).resolve().parent.parent / "data" / "samples" / "worlds" / "outdoor_shop.toml"


def shop(max_turns: int) -> tuple[WorldSpec, WorldSetup]:
    """The bundled shop world at its seed rows, as a task's `world` column holds it."""
    spec = load_world_spec(SHOP)
    initial = World(spec).snapshot()
    setup = WorldSetup(
        world_id=spec.world_id, spec=spec.model_dump_json(), initial=initial, max_turns=max_turns
    )
    return spec, setup


def test_a_tool_method_carries_the_schema_the_chat_template_shows():
    method = tool_method(
        "create_refund",
        "Refund an order.",
        {
            "properties": {
                "order_id": {"type": "string", "description": "the order"},
                "amount": {"type": "number"},
                "kind": {"type": "string", "enum": ["full", "partial"]},
            },
            "required": ["order_id"],
        },
    )
    schema = get_json_schema(method)["function"]
    assert schema["name"] == "create_refund" and schema["description"] == "Refund an order."
    properties = schema["parameters"]["properties"]
    assert properties["order_id"] == {"type": "string", "description": "the order"}
    assert properties["amount"]["type"] == "number"
    assert properties["kind"]["enum"] == ["full", "partial"]
    assert schema["parameters"]["required"] == ["order_id"]


@pytest.mark.parametrize(
    ("name", "parameters"),
    [
        ("get-order", {}),
        ("reset", {}),
        ("lookup", {"properties": {"class": {"type": "string"}}}),
        ("lookup", {"properties": {"order id": {"type": "string"}}}),
    ],
)
def test_a_tool_no_method_can_be_is_refused(name, parameters):
    with pytest.raises(ValueError, match="cannot be"):
        tool_method(name, "", parameters)


def test_a_world_environment_runs_calls_as_the_world_runtime_does_within_its_budget():
    spec, setup = shop(max_turns=2)
    environment_class = world_environment(spec)
    assert sorted(f.__name__ for f in tools_of(environment_class)) == sorted(
        t.name for t in spec.tools
    )
    reference = World(spec)
    environment = environment_class()
    environment.reset(world=setup.model_dump_json())
    assert (
        environment.check_stock(sku="TENT-2P")
        == reference.call("check_stock", {"sku": "TENT-2P"}).message()
    )
    assert "error" in environment.check_stock(sku=17)  # the world's own argument check
    assert environment.check_stock(sku="TENT-2P") == TOO_MANY_CALLS  # max_turns calls
    environment.reset(world=setup.model_dump_json())  # a new episode, a new budget and world
    assert environment.check_stock(sku="TENT-2P") != TOO_MANY_CALLS


def test_doc_search_and_replay_environments_answer_as_their_harnesses():
    index = CorpusIndex(CHUNKS)
    search = search_environment(index, max_calls=2)()
    assert "search" in search.reset()  # the instruction appended to the question
    assert search.search(query="Harlow mill") == index.search_result("Harlow mill")
    assert search.read(passage_id="c-mill") == index.read_result("c-mill")
    assert search.read(passage_id="c-mill") == TOO_MANY_CALLS

    recorded = refund_environment()
    environment = replay_environment(recorded)()
    environment.reset(replay=recorded.model_dump_json())
    asked = {"order_id": "ord-1", "reason": "broken"}
    assert environment.create_refund(**asked) == replay(
        recorded, ToolCall(name="create_refund", arguments=asked), set()
    )
    assert environment.create_refund(order_id="ORD-2") == NO_RESULT


def test_rows_get_their_family_environment_or_are_left_out_with_a_reason(tmp_path):
    spec = load_world_spec(SHOP)
    world = WorldSetup(
        world_id=spec.world_id,
        spec=spec.model_dump_json(),
        initial=World(spec).snapshot(),
        max_turns=3,
    )
    recorded = ToolEnvironment(tools=[REFUND], recorded=[])
    rows = [
        {"world": world.model_dump_json(), "replay": "null", "harness": "world_tools"},
        {"world": "null", "replay": recorded.model_dump_json(), "harness": "tool_replay"},
        {"world": None, "replay": None, "harness": "doc_search"},
        {"world": None, "replay": None, "harness": "open_book"},
    ]
    found = environments_for(rows, tmp_path, 3)  # no corpus.parquet in this version
    assert found.names[0] == f"world:{spec.world_id}" and found.names[1].startswith("replay:")
    assert found.names[2:] == [None, "single_turn"]
    assert found.left_out == {"doc_search_without_corpus": 1}
    pq.write_table(
        pa.Table.from_pylist([{"chunk_id": c, "text": t} for c, t in CHUNKS]),
        tmp_path / "corpus.parquet",
    )
    assert environments_for(rows, tmp_path, 3).names[2] == "doc_search"


def test_gold_episodes_score_1_and_warm_start_on_every_assistant_turn():
    spec, world = shop(max_turns=3)
    reference = World(spec)
    reference.call("check_stock", {"sku": "TENT-2P"})
    verifier = {
        "type": "world_state",
        "tool_calls": [{"name": "check_stock", "arguments": {"sku": "TENT-2P"}}],
        "final_state": reference.snapshot(),
    }
    row = {
        "prompt": [{"role": "user", "content": "How many TENT-2P are in stock?"}],
        "solution": "",
        "verifier": json.dumps(verifier),
        "world": world.model_dump_json(),
        "harness": "world_tools",
        "evidence": None,
    }
    name = f"world:{spec.world_id}"
    factories = {name: world_environment(spec)}
    prompt, completion = gold_episode(row, factories[name](), training_of(name).gold_calls(row))
    assert [m["role"] for m in completion] == ["assistant", "tool", "assistant"]
    assert completion[1]["content"] == reference.call("check_stock", {"sku": "TENT-2P"}).message()
    sft = warm_start_rows([row], [name], factories, verifier_reward)
    assert [len(r["prompt"]) for r in sft] == [1, 3]  # each assistant turn after what came before
    assert all(r["completion"][0]["role"] == "assistant" for r in sft)
    assert json.loads(sft[0]["tools"]) == tool_schemas(factories[name])
    wrong = {**row, "verifier": json.dumps({**verifier, "final_state": {}})}
    assert warm_start_rows([wrong], [name], factories, verifier_reward) == []  # no gold pass


def test_episodes_become_proxy_records_that_read_back_as_conversations(tmp_path):
    prompt = [{"role": "user", "content": "When did the Harlow mill close?"}]
    call = {"type": "function", "function": {"name": "search", "arguments": {"query": "mill"}}}
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "search", "content": "Results: [c-mill] closed in 1887"},
        {"role": "assistant", "content": "1887"},
    ]
    sent = openai_messages([*prompt, *completion], "r1")
    assert sent[2]["tool_call_id"] == sent[1]["tool_calls"][0]["id"]
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == '{"query": "mill"}'
    lake = Lake(tmp_path / "home")
    recorder = EpisodeRecorder(lake, "train-run", "policy")
    environment = search_environment(CorpusIndex(CHUNKS), 3)()
    scored = recorder.wrap(verifier_reward)
    rewards = scored(
        [prompt],
        [completion],
        verifier=[json.dumps({"type": "exact_or_f1"})],
        solution=["1887"],
        environments=[environment],
    )
    assert rewards == [1.0] and recorder.episodes == 1
    calls = lake.rows("SELECT * FROM proxy_calls ORDER BY call_id")
    assert len(calls) == 2 and len({c["rollout_id"] for c in calls}) == 1  # a record per turn
    tools = json.loads(calls[0]["params"])["tools"]
    assert [t["function"]["name"] for t in tools] == ["read", "search"]
    [conversation] = read_proxy_records(sorted((tmp_path / "home" / "lake").rglob("*.parquet")))
    assert [m["role"] for m in conversation.messages] == ["user", "assistant", "tool", "assistant"]
    assert conversation.messages[1]["tool_calls"][0]["name"] == "search"
    assert conversation.messages[-1]["content"] == "1887"


def test_a_smoke_run_takes_the_shortest_task_of_each_environment_then_fills_its_step(tmp_path):
    from datasets import Dataset

    from harnesses.trainer import with_environments

    _, world = shop(max_turns=3)

    def row(text: str, world_column: str | None = None) -> dict:
        prompt = [{"role": "user", "content": text}]
        return {"prompt": prompt, "world": world_column, "environment": None, "harness": "x"}

    rows = [row("a longer question"), row("short?"), row("a world task", world.model_dump_json())]
    rows.append(row("the longest question of all"))
    picked, _ = with_environments(Dataset.from_list(rows), tmp_path, 3, one_per_environment=2)
    assert [r["prompt"][0]["content"] for r in picked] == ["short?", "a world task"]
    assert picked["environment"] == ["single_turn", f"world:{world.world_id}"]
    single = Dataset.from_list([r for r in rows if r["world"] is None])
    picked, _ = with_environments(single, tmp_path, 3, one_per_environment=2)
    assert [r["prompt"][0]["content"] for r in picked] == ["a longer question", "short?"]
    everything, _ = with_environments(single, tmp_path, 3, one_per_environment=0)
    assert len(everything) == 3 and "replay" in everything.column_names
