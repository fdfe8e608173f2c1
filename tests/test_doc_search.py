"""The doc-search harness: BM25 search and read tools, a turn limit, a final answer."""

from __future__ import annotations

import asyncio
import json

import pyarrow.parquet as pq

from data.export import export_taskset
from data.lake import Evidence
from data.runtime.corpus_index import CorpusIndex
from families import export_kinds
from harnesses.doc_search import DocSearch
from sources import groupings
from sources.documents import ingest_docs
from tests.conftest import endpoints_for, make_context, run_llm_stages
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM
from tests.test_generator_and_judges import first_task
from tests.test_pipeline import small_corpus

CHUNKS = [
    ("c-mill", "The Harlow mill closed in 1887 after the flood of the River Kelm."),
    ("c-bridge", "The Orvanne bridge carries about 21,000 vehicles each day."),
    ("c-club", "Kelmside Rovers play their home games at the Mill Field."),
]


def test_search_ranks_the_matching_passage_first_and_read_returns_it():
    index = CorpusIndex(CHUNKS)
    hits = index.search("when did the Harlow mill close")
    assert hits[0][0] == "c-mill" and "1887" in hits[0][1]
    assert index.search("vehicles bridge")[0][0] == "c-bridge"
    assert index.search("the of and") == []  # stopwords only: nothing to match
    assert index.read(" c-club ") == CHUNKS[2][1] and index.read("c-none") is None


def scripted_episode(replies):
    """A solver that plays `replies` in order and records what it was shown."""
    shown = []

    def respond(role, messages, params):
        shown.append(messages[-1]["content"])
        return replies[len(shown) - 1]

    return respond, shown


def run_episode(respond, max_turns=4):
    task = first_task(ScriptedLLM(Oracle().respond)).model_copy(
        update={"evidence": [Evidence(chunk_id="c-mill", quote=CHUNKS[0][1])]}
    )
    llm = ScriptedLLM(respond)
    harness = DocSearch(CorpusIndex(CHUNKS), max_turns=max_turns)
    (reply,) = asyncio.run(
        harness.attempt(task, llm, ["rollout-9"], temperature=0.8, max_tokens=48, seed=5)
    )
    return reply, llm


def test_an_episode_searches_reads_and_answers_under_one_rollout():
    respond, shown = scripted_episode(
        [
            json.dumps({"tool": "search", "argument": "Harlow mill closed"}),
            json.dumps({"tool": "read", "argument": "c-mill"}),
            json.dumps({"tool": "answer", "argument": "1887"}),
        ]
    )
    reply, llm = run_episode(respond)
    assert reply.text == "1887" and reply.rollout_id == "rollout-9"
    assert shown[1].startswith("Results:\n[c-mill]") and shown[2].startswith("Passage c-mill:")
    assert llm.rollouts == ["rollout-9"] * 3
    seeds = [params["seed"] for _, _, params in llm.requests]
    assert len(set(seeds)) == 3  # every turn its own seed
    system = llm.requests[0][1][0]
    assert system["role"] == "system" and "collection of documents" in system["content"]
    assert reply.usage.completion_tokens == 15  # three turns of 5


def test_unusable_replies_cost_turns_and_no_answer_scores_nothing():
    respond, shown = scripted_episode(
        ["not json", json.dumps({"tool": "read", "argument": "c-nowhere"})]
    )
    reply, _ = run_episode(respond, max_turns=2)
    assert reply.text == ""
    assert shown[1].startswith("That is not a valid action")


def test_pipeline_calibrates_through_the_doc_search_harness(tmp_path, oracle_server):
    home = tmp_path / "home"
    ctx = make_context(
        home, calibrate={"harness": "doc_search", "method": "fixed", "k": 2, "max_turns": 3}
    )
    ingest_docs([str(small_corpus(tmp_path))], ctx)
    run_llm_stages(ctx, endpoints_for(oracle_server))
    difficulty = ctx.lake.rows("SELECT harness, pass_rate FROM difficulty")
    assert difficulty and {d["harness"] for d in difficulty} == {"doc_search"}
    assert any(d["pass_rate"] > 0 for d in difficulty)  # the tools found some facts
    per_rollout = ctx.lake.rows(
        "SELECT rollout_id, count(*) AS turns FROM proxy_calls GROUP BY rollout_id"
    )
    attempts = ctx.lake.rows("SELECT rollout_id FROM attempts")
    assert {a["rollout_id"] for a in attempts} <= {r["rollout_id"] for r in per_rollout}
    assert max(r["turns"] for r in per_rollout) == 3  # search, read, answer
    turns = ctx.config.calibrate.max_turns
    tasksets = home / "tasksets"
    exported = export_taskset(
        ctx.lake, "docqa", tasksets, kinds=export_kinds(), groupings=groupings(), search_turns=turns
    )
    assert exported.n_tasks > 0
    # the environment travels with the tasks: every chunk calibration searched, in its order
    corpus = pq.read_table(exported.path / "corpus.parquet").to_pylist()
    chunks = ctx.lake.rows("SELECT chunk_id, text FROM chunks ORDER BY chunk_id")
    assert corpus == chunks
    manifest = json.loads((exported.path / "manifest.json").read_text())
    assert manifest["corpus"] == {"file": "corpus.parquet", "chunks": len(chunks), "max_turns": 3}


def test_a_corpus_of_stopwords_searches_to_nothing_and_ids_read_with_brackets():
    assert CorpusIndex([("c1", "the and of"), ("c2", "it is")]).search("anything") == []
    assert CorpusIndex(CHUNKS).read("[c-mill]") == CHUNKS[0][1]
