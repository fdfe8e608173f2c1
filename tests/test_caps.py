"""Every setting that caps what the pipeline does, set small and counted where the real stage
runs: the stage does no more than the setting allows (in all, where the setting counts in all:
a later run over a grown lake adds nothing), and a candidate past a size limit is refused."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from itertools import cycle
from pathlib import Path

import pytest

from data.config import FoundryConfig, GenerateConfig, ReportsConfig, WorldsConfig
from data.lake import Task
from data.repos import build_sample_repo, git
from data.runtime.sandbox import Limits
from families import family_of
from families.bug_injection import inject_bugs
from families.code_stages import DESCRIBE, SEQUENCE, replay_commits
from families.commit_choice import replay_order
from families.doc_qa import GENERATE, ChunkInput
from families.doc_report import REPORTS, load_documents
from families.function_rebuild import rebuild_functions
from families.stage import StageContext
from families.trace_stages import INTENTS, TRACE_TASKS
from families.world_stages import TRACE_WORLDS
from flows.review_stages import load_repair_material
from flows.stage_runs import one_at_a_time, run_llm_batch, run_stages, solver_through_proxy
from flows.stages import CONTROLS, calibrate_into
from generators import doc_qa, doc_report, world_tasks
from generators.candidates import Candidate, Rejection
from harnesses.doc_search import NAME as DOC_SEARCH
from harnesses.world_agent import ACTIONS_NAME, WorldTools
from sources.documents import ingest_docs
from sources.repositories import ingest_repository
from sources.traces import ingest_trace_files
from tests.conftest import SAMPLE_DOCS, endpoints_for, make_context, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM
from tests.test_adversity import git_repo
from tests.test_repos import IDENTITY
from tests.test_traces import SAMPLE_TRACES
from tests.test_world_tasks import SHOP, loaded

DOCS = sorted(SAMPLE_DOCS.glob("*.md"))


def statuses(ctx: StageContext, stage: str) -> list[dict]:
    """The status rows of `stage`, every run's."""
    return ctx.lake.rows("SELECT * FROM status WHERE stage = ? ORDER BY item_id", [stage])


def items_of(ctx: StageContext, stage: str) -> set[str]:
    """The items `stage` took, every run's."""
    return {row["item_id"] for row in statuses(ctx, stage)}


# --- documents: chunks, candidates, reports ---------------------------------------------------

DOCUMENT_CAPS = {
    "ingest": {"chunk_chars": 400},
    "generate": {"max_chunks": 3, "candidates_per_chunk": 1},
    "reports": {"max_reports": 1, "facts_per_passage": 1},
}


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> StageContext:
    """Two documents through `generate` and `reports` under DOCUMENT_CAPS, then two more
    documents ingested and a second run under the same caps."""
    home = tmp_path_factory.mktemp("documents") / "home"
    first = make_context(home, **DOCUMENT_CAPS)
    ingest_docs([str(d) for d in DOCS[:2]], first)
    second = make_context(home, run_id="run-2", **DOCUMENT_CAPS)
    with FakeOpenAIServer(Oracle()) as server:
        run_llm_stages(first, endpoints_for(server), [GENERATE, REPORTS])
        ingest_docs([str(d) for d in DOCS[2:4]], second)
        run_llm_stages(second, endpoints_for(server), [GENERATE, REPORTS])
    return second


def test_max_chunks_caps_the_chunks_generated_from_in_all(documents):
    generated = statuses(documents, "generate")
    assert len(generated) == 3 and {row["run_id"] for row in generated} == {"run-1"}
    chunks = [r["chunk_id"] for r in documents.lake.rows("SELECT chunk_id FROM chunks ORDER BY 1")]
    assert chunks[:3] != sorted(items_of(documents, "generate"))  # the new chunks sort first


def test_candidates_per_chunk_caps_the_candidates_of_a_chunk(documents):
    per_chunk = Counter(row["item_id"].split("#")[0] for row in statuses(documents, "candidate"))
    assert set(per_chunk.values()) == {1}


def test_max_reports_caps_the_documents_reported_on_in_all(documents):
    reported = statuses(documents, "reports")
    assert [(row["status"], row["run_id"]) for row in reported] == [("done", "run-1")]


def test_facts_per_passage_caps_the_facts_a_report_is_graded_on(documents):
    [report] = [t for t in documents.lake.records("tasks") if t.kind == "doc_report"]
    passages = Counter(evidence.chunk_id for evidence in report.evidence)
    assert len(passages) == 2 and set(passages.values()) == {1}
    assert len(report.verifier.rubric) == 2


def test_chunk_chars_caps_the_length_of_a_chunk(documents):
    lengths = [r["n"] for r in documents.lake.rows("SELECT length(text) AS n FROM chunks")]
    assert max(lengths) <= 400 and len(lengths) > 10


def test_max_file_bytes_refuses_a_larger_document_unread(tmp_path):
    ctx = make_context(tmp_path / "home", ingest={"max_file_bytes": 1000})
    small = tmp_path / "small.md"
    small.write_text("# Small\n\nThe Harlow mill closed in 1887 after the flood of that spring.\n")
    ingest_docs([str(small), str(DOCS[0])], ctx)
    outcomes = {Path(row["item_id"]).name: row["reason"] for row in statuses(ctx, "ingest")}
    assert outcomes == {"small.md": "ingested", DOCS[0].name: "too_large"}


def test_convert_timeout_s_refuses_a_document_converted_too_slowly(tmp_path):
    ctx = make_context(tmp_path / "home", ingest={"convert_timeout_s": 0.001})
    ingest_docs([str(d) for d in DOCS[:2]], ctx)
    assert {row["reason"] for row in statuses(ctx, "ingest")} == {"conversion_timeout"}


@pytest.mark.parametrize(
    ("setting", "limit", "reason", "size"),
    [
        ("max_answer_words", 1, "answer_too_long", lambda task: len(task.answer.split())),
        ("max_question_chars", 60, "question_too_long", lambda task: len(task.question)),
    ],
)
def test_generate_refuses_an_answer_or_question_past_its_limit(
    documents, setting, limit, reason, size
):
    config = GenerateConfig(candidates_per_chunk=3, **{setting: limit})
    llm = ScriptedLLM(Oracle().respond, roles=["generator"])
    chunks = doc_qa_inputs(documents)
    made = [
        result
        for loaded in chunks
        for result in asyncio.run(
            doc_qa.generate(loaded.chunk, loaded.source_path, llm, config, loaded.generic)
        )
    ]
    tasks = [r.task for r in made if isinstance(r, Candidate)]
    assert tasks and max(size(task) for task in tasks) <= limit
    assert reason in {r.reason for r in made if isinstance(r, Rejection)}


def doc_qa_inputs(ctx: StageContext) -> list[ChunkInput]:
    """Every chunk of the lake as the `generate` stage loads it."""
    ids = [r["chunk_id"] for r in ctx.lake.rows("SELECT chunk_id FROM chunks ORDER BY 1")]
    return list(GENERATE.load(ctx, ids).values())


def test_max_request_chars_refuses_a_longer_report_request(documents):
    [source_id] = items_of(documents, "reports")
    document = load_documents(documents, [source_id])[source_id]
    llm = ScriptedLLM(Oracle().respond, roles=["generator"])
    made = asyncio.run(doc_report.generate(document, llm, ReportsConfig(max_request_chars=40), 0.0))
    assert [r.reason for r in made if isinstance(r, Rejection)] == ["request_too_long"]


def test_neighbours_caps_the_chunks_a_two_hop_question_may_bridge_to(documents):
    tasks = [t.task_id for t in documents.lake.records("tasks") if t.kind == "doc_qa"]
    ctx = make_context(documents.config.home, repair={"neighbours": 1})
    material = load_repair_material(ctx, tasks)
    assert {len(found.material.neighbours) for found in material.values()} == {1}


# --- calibration: attempts, turns, tokens -----------------------------------------------------


def calibrated(
    documents: StageContext, replies: Callable[[Task], list[str]], **calibrate: object
) -> ScriptedLLM:
    """The calibrate stage's work on one of the documents' tasks under these `[calibrate]`
    settings, the solver giving `replies(task)` in turn: the solver, with the requests it got."""
    ctx = make_context(documents.config.home, run_id="calibrate", calibrate=calibrate)
    task = next(t for t in ctx.lake.records("tasks") if t.kind == "doc_qa")
    given = cycle(replies(task))
    solver = ScriptedLLM(lambda role, messages, params: next(given))
    asyncio.run(calibrate_into("calibrate")(ctx, task.task_id, task, solver))
    return solver


def test_max_attempts_caps_the_attempts_at_a_task(documents):
    solver = calibrated(
        documents,
        lambda task: [task.answer] * 3 + ["no idea"],  # near the band's top: left open
        harness="closed_book",
        max_attempts=4,
        round_size=2,
    )
    assert len(solver.requests) == 4


def test_max_turns_caps_the_turns_of_a_search_attempt(documents):
    never_answers = json.dumps({"tool": "search", "argument": "mill"})
    solver = calibrated(
        documents,
        lambda task: [never_answers],
        harness=DOC_SEARCH,
        method="fixed",
        k=1,
        max_turns=2,
    )
    assert len(solver.requests) == 2


def test_max_tokens_caps_a_solvers_reply(documents):
    solver = calibrated(
        documents,
        lambda task: [task.answer],
        harness="closed_book",
        method="fixed",
        k=2,
        max_tokens=20,
    )
    assert [params["max_tokens"] for _, _, params in solver.requests] == [20, 20]


@pytest.mark.parametrize(
    ("kind", "section"),
    [
        ("doc_qa", "calibrate"),
        ("commit_replay", "code"),
        ("function_rebuild", "code"),
        ("trace_answer", "traces"),
        ("world_tool_use", "worlds"),
        ("doc_report", "reports"),
    ],
)
def test_each_familys_attempts_take_its_token_cap(kind, section):
    key = "max_tokens" if section == "calibrate" else "attempt_max_tokens"
    config = FoundryConfig(**{section: {key: 77}})
    assert family_of(kind).attempt_config(config).max_tokens == 77


# --- judges, batches and the sandbox ---------------------------------------------------------


def test_control_items_caps_the_items_of_each_kind_a_judge_answers(documents):
    ctx = make_context(documents.config.home, run_id="controls", verify={"control_items": 1})
    with FakeOpenAIServer(Oracle()) as server:
        run_llm_stages(ctx, endpoints_for(server), [CONTROLS])
    [record] = ctx.lake.records("judge_controls")
    assert {kind: items for kind, (items, _) in record.by_kind.items()} == {
        "answer": 1,
        "accept": 1,
        "reject": 1,
    }
    assert len(server.requests) == 3


def test_batch_size_caps_the_items_of_a_batch(tmp_path):
    ctx = make_context(tmp_path / "home", batch_size=2)
    ingest_docs([str(DOCS[0]), str(DOCS[1])], ctx)
    chunks = len(ctx.lake.rows("SELECT chunk_id FROM chunks"))
    sizes = []
    with (
        FakeOpenAIServer(Oracle()) as server,
        solver_through_proxy(ctx, endpoints_for(server)) as proxied,
    ):

        def run_batch(stage, index, group):
            sizes.append(len(group))
            return run_llm_batch(stage, group, ctx, proxied)

        run_stages([GENERATE], ctx, one_at_a_time(ctx, run_batch))
    assert chunks > 2 and sum(sizes) == chunks and max(sizes) == 2


def test_the_sandbox_settings_are_the_limits_of_each_command(tmp_path):
    sandbox = {"wall_s": 3.0, "memory_mb": 300, "processes": 8, "file_mb": 2}
    ctx = make_context(tmp_path / "home", sandbox=sandbox)
    assert ctx.limits == Limits(**sandbox)  # each enforced: tests/test_sandbox.py


# --- repositories: replays, functions, bugs ---------------------------------------------------


@pytest.fixture(scope="module")
def ledgerline(tmp_path_factory) -> tuple[Path, Path]:
    """The sample repository ingested: (its home, the repository)."""
    root = tmp_path_factory.mktemp("caps-code")
    repo = build_sample_repo(root / "ledgerline")
    ingest_repository(str(repo), None, make_context(root / "home"))
    return root / "home", repo


@pytest.fixture(scope="module")
def replayed(ledgerline):
    """Replayed under `max_replays = 3`, described and sequenced under 2 (the requests the
    generator got), then a new commit ingested and replayed under 3 again (its counts)."""
    home, repo = ledgerline
    replay_commits(make_context(home, code={"max_replays": 3}))
    ctx = make_context(home, run_id="run-2", code={"max_replays": 2, "statement_max_tokens": 60})
    with FakeOpenAIServer(Oracle()) as server:
        run_llm_stages(ctx, endpoints_for(server), [DESCRIBE, SEQUENCE])
    (repo / "tests" / "test_later.py").write_text("def test_later():\n    assert True\n")
    (repo / "src" / "ledgerline" / "later.py").write_text("LATER = 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "--message", "A later change", env=IDENTITY)
    later = make_context(home, run_id="run-3", code={"max_replays": 3})
    ingest_repository(str(repo), None, later)
    return ctx, server.requests, replay_commits(later)


# the sample's replayable commits, newest first
NEWEST = [
    "Sort the monthly report by month",
    "Add currency conversion at given rates",
    "Count refunds in category totals",
]


def subjects(ctx: StageContext, stage: str) -> list[str]:
    """The first lines of the messages of the commits `stage` took, sorted."""
    commits = {f"{c.repo_id}:{c.sha}": c.message for c in ctx.lake.records("commits")}
    return sorted(commits[item].splitlines()[0] for item in items_of(ctx, stage))


def test_max_replays_caps_the_commits_replayed_in_all(replayed):
    ctx, _, later = replayed
    assert [row["reason"] for row in statuses(ctx, "replay")] == ["replayed"] * 3
    assert subjects(ctx, "replay") == sorted(NEWEST)
    assert later == {}  # the commit ingested since is not replayed: the cap is reached


def test_max_replays_caps_the_replayed_commits_described(replayed):
    ctx, _, _ = replayed
    assert len(ctx.lake.records("replays")) == 3
    assert subjects(ctx, "describe") == sorted(NEWEST[:2])


def test_statement_max_tokens_caps_a_statement(replayed):
    _, requests, _ = replayed
    assert [body["max_tokens"] for body in requests] == [60, 60]


def test_replay_takes_replayable_commits_first_newest_first_repositories_in_turn():
    def commit(repo: str, sha: str, day: int, kind: str = "source_and_tests", parent: str = "p"):
        at = f"2024-03-{day:02d}T12:00:00+00:00"
        return {"repo_id": repo, "sha": sha, "authored_at": at, "kind": kind, "parent": parent}

    commits = [
        commit("a", "a1", 1, parent=""),
        commit("a", "a2", 2),
        commit("a", "a3", 3),
        commit("a", "a4", 9, kind="other"),
        commit("b", "b1", 4),
        commit("b", "b2", 5),
        commit("b", "b3", 6),
        commit("b", "b4", 8),
    ]
    order = [item.split(":")[1] for item in replay_order(commits)]
    assert order == ["b4", "a3", "b3", "a2", "b2", "b1", "a4", "a1"]
    assert replay_order(reversed(commits)) == replay_order(commits)


@pytest.fixture(scope="module")
def at_head(ledgerline) -> StageContext:
    """Function rebuild and bug injection at HEAD under one function each."""
    home, _ = ledgerline
    ctx = make_context(home, run_id="head", code={"max_functions": 1, "max_bugs": 1})
    rebuild_functions(ctx)
    inject_bugs(ctx)
    return ctx


@pytest.mark.parametrize("stage", ["rebuild_target", "inject_target"])
def test_max_functions_and_max_bugs_cap_the_functions_tried(at_head, stage):
    assert len(statuses(at_head, stage)) == 1


# one function whose signature alone (about 1,600 characters), which a rebuild shows with its
# stub, is longer than the smallest cap
PARAMETERS = [f"weight_of_the_component_number_{i}: int = {i}" for i in range(30)]
LONG_FUNCTION = (
    "def score(\n"
    + "".join(f"    {parameter},\n" for parameter in PARAMETERS)
    + ") -> int:\n"
    + "    return "
    + " + ".join(f"weight_of_the_component_number_{i}" for i in range(30))
    + "\n"
)
LONG_REPO = {
    "pyproject.toml": '[project]\nname = "scoring"\nversion = "0.1.0"\n',
    "scoring/__init__.py": "",
    "scoring/score.py": LONG_FUNCTION,
    "tests/test_score.py": "from scoring.score import score\n\n\ndef test_score():\n"
    "    assert score() == 435\n",
}


def test_max_prompt_chars_refuses_a_code_task_whose_files_do_not_fit(tmp_path):
    """The smallest cap (1,000) under the one function's signature, which a rebuild must show
    whole: its task is refused."""
    assert len(LONG_FUNCTION) > 1_000
    ctx = make_context(tmp_path / "home", code={"max_functions": 1, "max_prompt_chars": 1000})
    ingest_repository(str(git_repo(tmp_path / "scoring", LONG_REPO)), None, ctx)
    rebuild_functions(ctx)
    assert [row["reason"] for row in statuses(ctx, "rebuild")] == ["files_too_long"]
    assert not ctx.lake.records("tasks")


# --- traces and worlds ------------------------------------------------------------------------


def test_max_record_bytes_refuses_a_longer_trace_line(tmp_path):
    def line(request: str) -> str:
        return json.dumps({"messages": [{"role": "user", "content": request}], "response": "ok"})

    traces = tmp_path / "chat.jsonl"
    traces.write_text(f"{line('x' * 3000)}\n{line('Where is my parcel?')}\n")
    ctx = make_context(tmp_path / "home", traces={"max_record_bytes": 1000})
    ingest_trace_files([str(traces)], ctx)
    outcomes = {row["item_id"][-1]: row["reason"] for row in statuses(ctx, "trace_ingest")}
    assert outcomes == {"1": "too_large", "2": "ingested"}


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> StageContext:
    """One sample trace file through `intents` and `trace_tasks` under `max_traces = 2`, then
    every sample trace ingested and a second run under the same cap."""
    home = tmp_path_factory.mktemp("caps-traces") / "home"
    first = make_context(home, traces={"max_traces": 2})
    ingest_trace_files([str(SAMPLE_TRACES / "support-chat.jsonl")], first)
    second = make_context(home, run_id="run-2", traces={"max_traces": 2})
    with FakeOpenAIServer(Oracle()) as server:
        run_llm_stages(first, endpoints_for(server), [INTENTS, TRACE_TASKS])
        ingest_trace_files([str(SAMPLE_TRACES)], second)
        run_llm_stages(second, endpoints_for(server), [INTENTS, TRACE_TASKS])
    return second


def test_max_traces_caps_the_traces_turned_into_tasks_in_all(traced):
    taken = statuses(traced, "trace_tasks")
    assert len(taken) == 2 and {row["run_id"] for row in taken} == {"run-1"}
    traces = [r["trace_id"] for r in traced.lake.rows("SELECT trace_id FROM traces ORDER BY 1")]
    assert traces[:2] != sorted(items_of(traced, "trace_tasks"))  # the new traces sort first


def test_refine_rounds_caps_the_rewrites_of_a_world_from_traces(traced):
    ctx = make_context(
        traced.config.home,
        run_id="worlds",
        worlds={"refine_rounds": 1},
        scope={"kinds": ["world_tool_use"]},
    )
    with FakeOpenAIServer(lambda body: "no world here") as server:
        run_llm_stages(ctx, endpoints_for(server), [TRACE_WORLDS])
    rounds = Counter(row["item_id"].split("#")[0] for row in statuses(ctx, "trace_world_round"))
    assert rounds and set(rounds.values()) == {1}


def test_max_turns_caps_the_turns_of_a_world_attempt():
    generator = ScriptedLLM(Oracle().respond, roles=["generator"])
    config = WorldsConfig(tasks_per_world=1, max_turns=2)
    made = asyncio.run(world_tasks.generate(loaded(SHOP), generator, config))
    [task] = [r.task for r in made if isinstance(r, Candidate)]
    solver = ScriptedLLM(lambda role, messages, params: "I will look that up.", roles=["solver"])
    harness = WorldTools(ACTIONS_NAME)
    asyncio.run(harness.attempt(task, solver, ["r-1"], temperature=0.0, max_tokens=32, seed=1))
    assert len(solver.requests) == 2
