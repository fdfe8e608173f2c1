"""Every family in the verifiers v1 taskset package, solvable as taskfoundry calibrated it:
document-search tasks get `search` and `read` over the shipped corpus, tool-replay tasks the
recorded tools and results, world tasks their world. In the verifiers library's own virtualenv,
`vf-validate` passes on a package holding all three; the package's reward grades the same
completions (gold, wrong, reward hacks) as taskfoundry's verifiers; its tool server answers the
same calls with the texts taskfoundry's harnesses showed; its turn limit is the calibration's;
and the prime-rl fragment trains on every packaged family."""

from __future__ import annotations

import asyncio
import json
import tomllib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data.export import SEARCH_TURNS, module_name, taskset_id, write_package, write_rl_toml
from data.lake import (
    VERIFIER_SPEC,
    ExactOrF1Spec,
    ToolCall,
    ToolEnvironment,
    ToolSpec,
    Trace,
    TraceMessage,
)
from data.runtime import corpus_index
from generators.trace_tasks import replay_task
from harnesses.doc_search import DocSearch
from harnesses.tool_replay import attempt_text, replay
from judges import tool_calls
from judges.rewards import trainer_task
from judges.verifier_types import package_graders
from judges.verifier_types.trainer_rewards import verifier_reward
from tests.exported_files import projected_rows
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.scripted_llm import ScriptedLLM
from tests.test_doc_search import CHUNKS
from tests.test_trace_tasks import REFUND, refund_trace
from tests.test_world_package import (
    VERIFIERS_PYTHON,
    cases_of,
    conversation,
    installed,
    needs_verifiers,
    shipped_as_it_is,
    verifiers_figures,
    verifiers_run,
    world_rows,
)

ROOT = Path(__file__).resolve().parent.parent
NAME = "families"
QUESTIONS = [  # (task id, question, gold answer) over test_doc_search's corpus
    ("search-mill", "When did the Harlow mill close?", "1887"),
    ("search-bridge", "How many vehicles cross the Orvanne bridge each day?", "21,000"),
    ("search-club", "Where do Kelmside Rovers play their home games?", "the Mill Field"),
]
LOOKUP = ToolSpec(
    name="lookup_order",
    description="An order's status and items.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}},
)
HELP = ToolSpec(
    name="search_help",
    description="Search the help centre.",
    parameters={"type": "object", "properties": {"query": {"type": "string"}}},
)


def row(task_id: str, kind: str, prompt: list[dict[str, Any]], answer: str, verifier: str, **rest):
    """A canonical taskset row with the columns the package and the prime-rl fragment read."""
    return {
        "task_id": task_id,
        "kind": kind,
        "prompt": prompt,
        "answer": answer,
        "verifier": verifier,
        "pass_rate": 0.5,
        "band": "in_band",
        "pool": "normal",
        "hackable": False,
        "harness": rest.get("harness", "single_turn"),
        "world": rest.get("world"),  # null, as the export writes a task without one
        "environment": rest.get("environment"),
        "workspace": rest.get("workspace"),
        "split": rest.get("split", "train"),
    }


def search_rows() -> list[dict[str, Any]]:
    """Document-search tasks, their prompts as the doc-QA generator writes them."""
    spec = ExactOrF1Spec(negatives=["1900"]).model_dump_json()
    return [
        row(
            task_id,
            "doc_qa",
            [
                {"role": "system", "content": "Answer with only the short answer."},
                {"role": "user", "content": question},
            ],
            answer,
            spec,
            harness=corpus_index.HARNESS,
        )
        for task_id, question, answer in QUESTIONS
    ]


def order_trace() -> Trace:
    """A production trace that looks an order up, searches the help centre (free text) and
    refunds part of it."""
    calls = [
        ToolCall(name="lookup_order", arguments={"order_id": "ORD-7"}, call_id="a"),
        ToolCall(name="search_help", arguments={"query": "partial refund policy"}, call_id="b"),
        ToolCall(
            name="create_refund",
            arguments={"order_id": "ORD-7", "amount": 24.5, "reason": "lamp", "kind": "partial"},
            call_id="c",
        ),
    ]
    results = [
        '{"status": "delivered", "items": ["lamp", "desk"]}',
        "Partial refunds are allowed within 30 days.",
        '{"refund_id": "RF-9", "status": "approved"}',
    ]
    messages = [
        TraceMessage(role="system", content="You help customers."),
        TraceMessage(role="user", content="The lamp of order ORD-7 broke, refund it (24.50)."),
    ]
    for call, result in zip(calls, results, strict=True):
        messages.append(TraceMessage(role="assistant", content="", tool_calls=[call]))
        messages.append(TraceMessage(role="tool", content=result, tool_call_id=call.call_id))
    messages.append(TraceMessage(role="assistant", content="Refunded 24.50 (RF-9)."))
    return refund_trace().model_copy(
        update={
            "trace_id": "t7",
            "messages": messages,
            "tools": [LOOKUP, HELP, REFUND],
            "request": messages[1].content,
            "answer": messages[-1].content,
        }
    )


def replay_rows() -> list[dict[str, Any]]:
    """Tool-replay tasks made from traces as taskfoundry makes them."""
    rows = []
    for trace in (refund_trace(), order_trace()):
        task = replay_task(trace, "gen")
        rows.append(
            row(
                task.task_id,
                task.kind,
                [m.model_dump(include={"role", "content"}) for m in task.prompt],
                task.answer,
                task.verifier.model_dump_json(),
                harness="tool_replay",
                environment=task.environment.model_dump_json(),
            )
        )
    return rows


def left_out_rows() -> list[dict[str, Any]]:
    """Tasks the package cannot score without a model or a sandbox."""
    prompt = [{"role": "user", "content": "Fix the parser."}]
    return [
        row("rubric-1", "trace_answer", prompt, "a reply", json.dumps({"type": "rubric"})),
        row(
            "code-1",
            "function_rebuild",
            prompt,
            "",
            json.dumps({"type": "unit_tests"}),
            workspace=json.dumps({"repo_id": "r1", "origin": "/nowhere", "base": "a" * 40}),
        ),
    ]


def all_rows() -> list[dict[str, Any]]:
    worlds = [{**r, "hackable": False} for r in world_rows()[:3]]
    return search_rows() + replay_rows() + worlds + left_out_rows()


def write_version(root: Path, corpus: bool = True) -> Path:
    version = root / "v3"
    version.mkdir(parents=True)
    (version / "manifest.json").write_text(json.dumps({"name": NAME, "version": "v3"}))
    if corpus:
        table = pa.Table.from_pylist([{"chunk_id": c, "text": t} for c, t in CHUNKS])
        pq.write_table(table, version / corpus_index.CORPUS_FILE)
    return version


# --- the cases: completions as turns, and tool calls --------------------------------------


def search_cases(task: dict[str, Any]) -> dict[str, Any]:
    """A search then a read then the gold answer; the gold padded with the question; the gold
    beside a rival; a wrong answer; a reply that only searched; nothing."""
    question = task["prompt"][-1]["content"]
    look = [
        {"calls": [("search", {"query": question})]},
        {"calls": [("read", {"passage_id": "c-mill"})]},
    ]
    completions = {
        "gold": [*look, {"reply": task["answer"]}],
        "padded": [*look, {"reply": f"{question} {task['answer']}"}],
        "hedged": [*look, {"reply": f"{task['answer']} or 1900"}],
        "wrong": [*look, {"reply": "1900"}],
        "searched_only": look,
        "empty": [{"reply": ""}],
    }
    calls = [
        ("search", {"query": question}),
        ("search", {"query": "the of and"}),
        ("read", {"passage_id": "c-bridge"}),
        ("read", {"passage_id": "[c-club]"}),
        ("read", {"passage_id": "c-nowhere"}),
    ]
    return {"completions": completions, "calls": calls}


def replay_cases(task: dict[str, Any]) -> dict[str, Any]:
    """The recorded calls in order; the first alone; in reverse; the first key argument
    changed; a wildcard call beside the recorded ones; the recorded calls three times over;
    nothing."""
    made = [(c["name"], c["arguments"]) for c in json.loads(task["answer"])["calls"]]
    name, arguments = made[0]
    key = next(iter(arguments))
    changed = [(name, {**arguments, key: f"{arguments[key]}-X"}), *made[1:]]
    completions = {
        "gold": [{"calls": made}, {"reply": "Done."}],
        "first_only": [{"calls": made[:1]}, {"reply": "Done."}],
        "reversed": [{"calls": made[::-1]}],
        "changed": [{"calls": changed}],
        "wildcard": [{"calls": [(name, {**arguments, key: "*"}), *made]}],
        "spam": [{"calls": made * 3}],
        "empty": [{"reply": ""}],
    }
    calls = [*made, made[0], changed[0], ("no_such_tool", {"x": 1})]
    return {"completions": completions, "calls": calls}


def world_cases(task: dict[str, Any]) -> dict[str, Any]:
    return {"completions": cases_of(task), "calls": []}


def cases_for(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    makers = {"doc_search": search_cases, "tool_replay": replay_cases}
    return {
        r["task_id"]: makers.get(r["harness"], world_cases)(r)
        for r in rows
        if r["task_id"] not in ("rubric-1", "code-1")
    }


# --- what taskfoundry gives for the same completions and calls ----------------------------


def taskfoundry_rewards(task: dict[str, Any], completions: dict[str, Any]) -> dict[str, float]:
    """`judges.tool_calls.grade` of the attempt's calls (tool replay), else `verifier_reward`
    of the conversation (answers and worlds)."""
    if task["harness"] == "tool_replay":
        spec = VERIFIER_SPEC.validate_json(task["verifier"])
        return {
            name: tool_calls.grade(
                spec,
                attempt_text(
                    [ToolCall(name=n, arguments=a) for t in turns for n, a in t.get("calls", [])]
                ),
            ).reward
            for name, turns in completions.items()
        }
    rewards = verifier_reward(
        [task["prompt"]] * len(completions),
        [conversation(turns) for turns in completions.values()],
        [task["verifier"]] * len(completions),
        answer=[task["answer"]] * len(completions),
        world=[task["world"]] * len(completions),
    )
    return dict(zip(completions, rewards, strict=True))


def shown_by_harness(harness: Any, task: Any, actions: list[str]) -> list[str]:
    """What the calibration harness told a scripted solver after each of `actions`."""
    shown: list[str] = []

    def respond(role, messages, params):
        shown.append(messages[-1]["content"])
        return actions[len(shown) - 1]

    llm = ScriptedLLM(respond)
    asyncio.run(harness.attempt(task, llm, ["r1"], temperature=0, max_tokens=64, seed=1))
    return shown[1 : len(actions)]


def search_results_by_harness(task: dict[str, Any], calls: list[Any]) -> list[str]:
    actions = [
        json.dumps({"tool": name, "argument": next(iter(arguments.values()))})
        for name, arguments in calls
    ]
    actions.append(json.dumps({"tool": "answer", "argument": "x"}))
    harness = DocSearch(corpus_index.CorpusIndex(CHUNKS), max_turns=len(actions))
    stand_in = trainer_task(task["prompt"], task["answer"], ExactOrF1Spec())
    return shown_by_harness(harness, stand_in, actions)


def replay_results_by_harness(task: dict[str, Any], calls: list[Any]) -> list[str]:
    """What the tool-replay harness tells a solver after each of `calls`, in one episode."""
    environment = ToolEnvironment.model_validate_json(task["environment"])
    used: set[int] = set()
    return [f"Result: {replay(environment, ToolCall(name=n, arguments=a), used)}" for n, a in calls]


# --- tests ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def family_package(tmp_path_factory) -> tuple[Path, Path, list[dict[str, Any]], dict[str, int]]:
    """A package of a version holding document-search, tool-replay and world tasks, one that
    needs a judge model and a code task whose repository tree the version lacks."""
    root = tmp_path_factory.mktemp("family-package")
    version = write_version(root)
    rows = all_rows()
    skipped = write_package(root / "taskset", version, rows, package_graders())
    return root / "taskset", version, rows, skipped


def test_the_package_ships_the_corpus_and_runtimes_and_lists_what_it_leaves_out(family_package):
    package, version, rows, skipped = family_package
    module = package / module_name(NAME)
    assert shipped_as_it_is(module / "runtime")
    graders = json.loads((module / "graders.json").read_text())
    assert graders == {"exact_or_f1": "answer", "llm_equivalence": "answer"} | {
        "tool_calls": "replay",
        "unit_tests": "code",
        "world_state": "world",
    }
    assert (module / "corpus.parquet").read_bytes() == (version / "corpus.parquet").read_bytes()
    assert skipped == {"verifier_rubric": 1, "code_without_workspace": 1}
    packaged = {r["task_id"]: r for r in projected_rows(module)}
    assert len(packaged) == len(rows) - 2
    for task in rows:
        if task["task_id"] not in packaged:
            continue
        mine = packaged[task["task_id"]]
        assert mine["harness"] == task["harness"] and mine["environment"] == task["environment"]
        if task["harness"] == corpus_index.HARNESS:
            assert mine["max_turns"] == SEARCH_TURNS == 4  # calibrate.max_turns's default
            system = mine["prompt"][0]["content"]
            assert "`search`" in system and system.endswith(task["prompt"][0]["content"])
            assert mine["prompt"][1:] == task["prompt"][1:]
        elif task["harness"] == "tool_replay":
            recorded = json.loads(task["environment"])["recorded"]
            assert mine["max_turns"] == len(recorded) + 2  # EXTRA_TURNS, as the harness
            assert mine["prompt"] == task["prompt"]
    readme = (package / "README.md").read_text()
    assert "| doc_qa | search | 3 |" in readme and "| tool_replay | replay | 2 |" in readme
    assert "| world_tool_use | world | 3 |" in readme
    assert "- `code-1` (function_rebuild): code_without_workspace: its repository tree" in readme
    assert "- `rubric-1` (trace_answer): verifier_rubric: needs a judge model" in readme


def test_a_search_task_of_a_version_without_its_corpus_is_left_out_and_said_so(tmp_path):
    version = write_version(tmp_path, corpus=False)
    skipped = write_package(tmp_path / "taskset", version, search_rows(), package_graders())
    assert skipped == {"doc_search_without_corpus": 3}
    readme = (tmp_path / "taskset" / "README.md").read_text()
    assert "`search-mill` (doc_qa): doc_search_without_corpus" in readme
    rl, left_out = write_rl_toml(tmp_path / "rl.toml", version, search_rows(), package_graders())
    assert rl == 0 and left_out == skipped


def test_prime_rl_never_trains_on_the_eval_split(tmp_path):
    version = write_version(tmp_path)
    rows = search_rows()
    rows[0]["split"], rows[1]["split"] = "eval", "train"

    trained, left_out = write_rl_toml(tmp_path / "rl.toml", version, rows, package_graders())

    assert trained == len(rows) - 1 and left_out == {"eval_split": 1}
    fragment = tomllib.loads((tmp_path / "rl.toml").read_text())["orchestrator"]
    [train], [held_out] = fragment["train"]["source"], fragment["eval"]["source"]
    assert (train["env"]["taskset"]["split"], held_out["env"]["taskset"]["split"]) == (
        "train",
        "eval",
    )
    assert held_out["num_examples"] == 1


@needs_verifiers
def test_the_package_grades_and_serves_every_family_as_taskfoundry_does(family_package, tmp_path):
    package, version, rows, _ = family_package
    trained, _ = write_rl_toml(tmp_path / "rl.toml", version, rows, package_graders())
    assert trained == len(rows) - 2  # every packaged family trains
    families = (tmp_path / "rl.toml").read_text().splitlines()[1]
    assert families == (
        "# Families: doc_qa (search tools): 3, tool_replay (replay tools): 2,"
        " world_tool_use (world tools): 3"
    )
    env = installed(package, tmp_path)
    cases = cases_for(rows)
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    ident = taskset_id(NAME)
    args = [ident, "cases.json", tmp_path / "rl.toml"]
    figures = verifiers_figures("verifiers_family_check.py", args, env, tmp_path)
    assert set(figures["rewards"]) == set(cases) and all(figures["validated"].values())
    assert sorted(figures["trained"]) == sorted(cases)

    for task in rows:
        if task["task_id"] not in cases:
            continue
        completions = cases[task["task_id"]]["completions"]
        expected = taskfoundry_rewards(task, completions)
        assert figures["rewards"][task["task_id"]] == expected, task["task_id"]
        limit = figures["tasks"][task["task_id"]][2]
        assert figures["stops"][task["task_id"]] == [False, True] and limit >= 1
    # the cases tell right from wrong, so the agreement above is no agreement on nothing
    search = {k: figures["rewards"][k] for k, *_ in QUESTIONS}
    assert all(r["gold"] == 1.0 and r["hedged"] == r["padded"] == 0.0 for r in search.values())
    assert all(r["searched_only"] == r["wrong"] == r["empty"] == 0.0 for r in search.values())
    replays = [figures["rewards"][r["task_id"]] for r in rows if r["harness"] == "tool_replay"]
    assert [r["gold"] for r in replays] == [1.0, 1.0]
    assert all(r["wildcard"] == r["spam"] == r["empty"] == r["changed"] == 0 for r in replays)
    assert replays[1]["first_only"] == pytest.approx(1 / 3)  # one of three expected calls

    for task in rows:
        if task["harness"] == corpus_index.HARNESS:
            calls = cases[task["task_id"]]["calls"]
            listed, *results = figures["tools"][task["task_id"]]
            assert listed == [["search", "read"]]
            assert [text for _, text in results] == search_results_by_harness(task, calls)
        elif task["harness"] == "tool_replay":
            calls = cases[task["task_id"]]["calls"]
            listed, *results = figures["tools"][task["task_id"]]
            names = [t["name"] for t in json.loads(task["environment"])["tools"]]
            assert listed == [names]
            shown = replay_results_by_harness(task, calls)
            assert ["Result: " + text for _, text in results] == shown
            assert [failed for failed, _ in results][-2:] == [True, True]  # nothing recorded

    validate = [VERIFIERS_PYTHON.parent / "vf-validate", ident, "--runtime.type", "subprocess"]
    verifiers_run([*validate, "--rich", "false", "-o", tmp_path / "validate"], env, tmp_path)
    (summary,) = (tmp_path / "validate").glob("*/summary.json")
    outcomes = json.loads(summary.read_text())["outcomes"]
    assert outcomes["valid"] == len(cases) and sum(outcomes.values()) == len(cases)


def scripted_model(plans: dict[str, list[Any]]):
    """A model that plays, for the task whose question it is asked, its plan's turns in order
    (a list of calls, or a reply), the last one again past the plan's end."""

    def respond(body: dict[str, Any]) -> str | dict[str, Any]:
        messages = body["messages"]
        question = [m["content"] for m in messages if m["role"] == "user"][-1]
        plan = plans[question]
        turn = sum(m["role"] == "assistant" for m in messages)
        step = plan[min(turn, len(plan) - 1)]
        if isinstance(step, str):
            return step
        calls = [
            {"id": f"call-{turn}-{i}", "name": name, "arguments": json.dumps(arguments)}
            for i, (name, arguments) in enumerate(step)
        ]
        return {"tool_calls": calls}

    return respond


@needs_verifiers
def test_a_rollout_searches_replays_and_stops_at_the_turn_limit(tmp_path):
    version = write_version(tmp_path)
    search = {r["task_id"]: r for r in search_rows()}
    replayed = replay_rows()[1]  # three recorded calls
    write_package(
        tmp_path / "taskset",
        version,
        [search["search-mill"], search["search-bridge"], replayed],
        package_graders(),
    )
    env = installed(tmp_path / "taskset", tmp_path, FAKE_API_KEY="k")
    made = [(c["name"], c["arguments"]) for c in json.loads(replayed["answer"])["calls"]]
    plans = {
        QUESTIONS[0][1]: [
            [("search", {"query": "Harlow mill close"})],
            [("read", {"passage_id": "c-mill"})],
            "1887",
        ],
        QUESTIONS[1][1]: [[("search", {"query": "bridge vehicles"})]],  # never answers
        replayed["prompt"][-1]["content"]: [*([call] for call in made), "Refunded."],
    }
    with FakeOpenAIServer(scripted_model(plans)) as server:
        args = [taskset_id(NAME), server.base_url, tmp_path / "eval"]
        rollouts = verifiers_figures("verifiers_rollout.py", args, env, tmp_path)
    index = corpus_index.CorpusIndex(CHUNKS)
    assert rollouts["search-mill"] == {
        "reward": 1.0,
        "stop": "agent_completed",
        "turns": 3,
        "tools": [index.search_result("Harlow mill close"), index.read_result("c-mill")],
    }
    assert rollouts["search-bridge"] == {
        "reward": 0.0,
        "stop": "turn_limit",  # the package's @vf.stop, at calibrate.max_turns
        "turns": SEARCH_TURNS,
        # the last call's result would come with the refused call: the trace never holds it
        "tools": [index.search_result("bridge vehicles")] * (SEARCH_TURNS - 1),
    }
    recorded = json.loads(replayed["environment"])["recorded"]
    assert rollouts[replayed["task_id"]] == {
        "reward": 1.0,
        "stop": "agent_completed",
        "turns": len(made) + 1,
        "tools": [r["result"] for r in recorded],
    }
