"""The repair loop: difficulty ladders, the doc-QA variant makers, and the stage end to end."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter

import pytest

from data.config import FoundryConfig, GenerateConfig
from data.export import export_taskset
from data.lake import (
    Chunk,
    Evidence,
    ExactOrF1Spec,
    Lineage,
    Message,
    RepairStep,
    SourceRef,
    Task,
    funnel,
)
from families import export_kinds
from families.doc_qa import FAMILY as DOC_QA
from flows.repair import Move, Stop, next_move
from generators.checks import CheckFailure, lexical_overlap
from generators.doc_qa import LADDER, SYSTEM_PROMPT
from generators.doc_qa_variants import (
    HINT_MARK,
    Material,
    Neighbour,
    answer_shape,
    bare_question,
    make_variant,
)
from sources import groupings
from sources.documents import ingest_docs
from tests.conftest import endpoints_for, make_context, run_llm_stages
from tests.fakes.hint_deaf_oracle import HintDeafOracle
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM, fake_endpoints
from tests.test_pipeline import small_corpus

EVIDENCE = "The Orvanne Bridge crosses the River Kelm at Tessaly Port."
NEIGHBOUR_TEXT = (
    "The River Kelm rises in the Dunmere Hills and floods every spring. "
    "Boats carried slate down the river until the railway came."
)
CONFIG = GenerateConfig()
SOLVER = fake_endpoints("http://solver.invalid/v1")["solver"]


def original(
    question: str = "Fill in the blank: The Orvanne Bridge crosses the River Kelm at ___.",
) -> Task:
    prompt = [
        Message(role="system", content="Answer briefly."),
        Message(role="user", content=question),
    ]
    verifier = ExactOrF1Spec(context=["The Orvanne Bridge crosses", "."])
    return Task(
        task_id=Task.make_id("doc_qa", prompt, "Tessaly Port", verifier),
        kind="doc_qa",
        prompt=prompt,
        answer="Tessaly Port",
        verifier=verifier,
        evidence=[Evidence(chunk_id="c1", quote=EVIDENCE)],
        source=[SourceRef(source_id="s1", path="docs/bridge.md", chunk_id="c1")],
        lineage=Lineage(
            generator="doc_qa",
            generator_version="2",
            prompt_hash="p",
            model="gen",
            seed="s",
            knobs={"focus_sentence": 0, "question_style": "cloze", "level": "base"},
        ),
    )


def neighbour(text: str = NEIGHBOUR_TEXT) -> Neighbour:
    chunk = Chunk(
        chunk_id="c2",
        source_id="s2",
        index=0,
        text=text,
        char_start=0,
        char_end=len(text),
        embedding=[0.0],
    )
    return Neighbour(chunk, "docs/river.md")


PASSAGE = f"Tessaly Port is a harbour town. {EVIDENCE} Its ferry runs twice a day."
MATERIAL = Material(title="The Orvanne Bridge", passage=PASSAGE, neighbours=[neighbour()])


def vary(task, level, llm=None, material=MATERIAL, direction=None):
    llm = llm or ScriptedLLM(lambda *_: pytest.fail("this level needs no model"))
    chosen = LADDER.level(level)
    names = [lv.name for lv in LADDER.levels]
    guess = "harder" if names.index(level) > names.index("base") else "easier"
    return asyncio.run(make_variant(task, chosen, direction or guess, material, llm, CONFIG))


def replying(question):
    return ScriptedLLM(lambda role, messages, params: json.dumps({"question": question}))


# --- control ------------------------------------------------------------------------------


def at(level: str | None = None, repair: RepairStep | None = None) -> Lineage:
    """A lineage at `level` (none: no level knob), made by `repair` if given."""
    knobs = {} if level is None else {"level": level}
    return original().lineage.model_copy(update={"knobs": knobs, "repair": repair})


def test_a_task_moves_one_level_toward_the_band_and_never_back():
    harder = next_move("too_easy", at("base"), LADDER, max_steps=2)
    assert isinstance(harder, Move) and harder.direction == "harder"
    assert [lv.name for lv in harder.levels] == ["paraphrased", "two_hop"]
    easier = next_move("too_hard", at(), LADDER, max_steps=2)  # no level knob: a base task
    assert [lv.name for lv in easier.levels][:3] == ["pointed", "hinted", "distractors"]

    assert next_move("in_band", at(), LADDER, 2) == Stop("in_band")
    one = RepairStep(parent="t0", root="t0", step=1, path=["base", "pointed"], direction="easier")
    step_one = at("pointed", one)
    assert next_move("too_easy", step_one, LADDER, 2) == Stop("straddles_band")
    assert next_move("too_hard", step_one, LADDER, 1) == Stop("step_limit", "1")
    assert next_move("", at(), LADDER, 2) == Stop("no_band")
    below = next_move("too_hard", at("hinted"), LADDER, 2)  # down to the open book
    assert [lv.name for lv in below.levels][:2] == ["distractors", "passage"]
    assert next_move("too_hard", at("evidence_hinted"), LADDER, 2) == Stop("no_easier_level")
    assert next_move("too_easy", at("two_hop"), LADDER, 2) == Stop("no_harder_level")


# --- variants -----------------------------------------------------------------------------


def test_open_book_levels_put_the_reading_in_the_system_message_and_change_the_environment():
    task = original()
    config = FoundryConfig()
    assert DOC_QA.environment(task, config, SOLVER) == "doc_search"  # the search levels: find it
    closed = config.model_copy(
        update={"calibrate": config.calibrate.model_copy(update={"harness": "closed_book"})}
    )
    assert DOC_QA.environment(task, closed, SOLVER) == "closed_book"  # the opt-in

    passage = vary(task, "passage")
    system, user = passage.prompt
    assert system.role == "system" and system.content.endswith("Passage:\n" + PASSAGE)
    assert user.content == task.question  # the question is unchanged: the leak gate sees it
    assert passage.lineage.knobs["context"] == "passage"
    assert DOC_QA.environment(passage, closed, SOLVER) == "open_book"

    evidence = vary(passage, "evidence")
    assert evidence.prompt[0].content.endswith("Passage:\n" + EVIDENCE)
    hinted = vary(evidence, "evidence_hinted")
    assert hinted.question == task.question + HINT_MARK + (
        'The answer has 2 words and starts with "T".'
    )
    assert hinted.lineage.repair.path == ["base", "passage", "evidence", "evidence_hinted"]

    distractors = vary(task, "distractors").prompt[0].content
    assert "Passage 1:" in distractors and "Passage 2:" in distractors
    assert PASSAGE in distractors and NEIGHBOUR_TEXT in distractors
    assert vary(task, "distractors").task_id == vary(task, "distractors").task_id  # seeded

    with pytest.raises(CheckFailure, match="no_neighbours"):
        vary(task, "distractors", material=Material("T", PASSAGE, []))
    with pytest.raises(CheckFailure, match="no_passage"):
        vary(task, "passage", material=Material("T", "", []))

    searched = vary(passage, "base", direction="harder")
    assert searched.prompt[0].content == SYSTEM_PROMPT.template.strip()
    assert DOC_QA.environment(searched, config, SOLVER) == "doc_search"


def test_hints_make_easier_variants_that_record_their_path():
    task = original()
    pointed = vary(task, "pointed")
    assert pointed.task_id != task.task_id
    assert pointed.answer == task.answer and pointed.evidence == task.evidence
    assert pointed.verifier == task.verifier  # same question: the cloze context still applies
    assert pointed.question == task.question + HINT_MARK + (
        'The fact is from the document "The Orvanne Bridge".'
    )
    knobs, repair = pointed.lineage.knobs, pointed.lineage.repair
    assert knobs["level"] == "pointed" and knobs["hint"] == "source"
    assert knobs["question_style"] == "cloze"
    assert repair == RepairStep(
        parent=task.task_id, root=task.task_id, step=1, path=["base", "pointed"], direction="easier"
    )

    hinted = vary(pointed, "hinted")
    assert hinted.question.count("Hint:") == 1 and bare_question(hinted) == task.question
    assert hinted.question.endswith('The answer has 2 words and starts with "T".')
    repair = hinted.lineage.repair
    assert (repair.parent, repair.root) == (pointed.task_id, task.task_id)
    assert (repair.step, repair.path) == (2, ["base", "pointed", "hinted"])


def test_a_question_takes_a_hint_too():
    task = original("Where does the Orvanne Bridge cross the River Kelm?")
    hinted = vary(task, "hinted")
    assert hinted.question.startswith(task.question + HINT_MARK)
    assert bare_question(hinted) == task.question


def test_hints_that_state_the_answer_or_name_nothing_are_refused():
    leaky = Material(title="Tessaly Port guide", passage=PASSAGE, neighbours=[])
    with pytest.raises(CheckFailure, match="hint_contains_answer"):
        vary(original(), "pointed", material=leaky)
    with pytest.raises(CheckFailure, match="no_source_title"):
        vary(original(), "pointed", material=Material(title=" ", passage=PASSAGE, neighbours=[]))
    with pytest.raises(CheckFailure, match="no_evidence"):
        vary(original().model_copy(update={"evidence": []}), "pointed")


def test_answer_shape_gives_the_form_not_the_answer():
    assert answer_shape("1961") == "is a number from 1960 to 1969"
    assert answer_shape("1,400") == "is a 4-digit number that starts with 1"
    assert answer_shape("7") == "is a number below ten"
    assert answer_shape("3.5") == "is a number with a decimal point"
    assert answer_shape("March 1902") == "is a month and a year"
    assert answer_shape("Ansel Varrow") == 'has 2 words and starts with "A"'


def test_a_paraphrase_is_kept_only_if_it_shares_fewer_words_with_the_evidence():
    task = original()
    reworded = "Where does the span over the Kelm reach land?"
    variant = vary(task, "paraphrased", replying(reworded))
    assert variant.question == reworded and variant.verifier.context == []
    knobs = variant.lineage.knobs
    assert knobs["overlap"] == "paraphrase" and knobs["overlap_pct"] < knobs["parent_overlap_pct"]
    assert knobs["question_style"] == "question"  # no longer a cloze
    assert knobs["overlap_pct"] == round(100 * lexical_overlap(reworded, EVIDENCE, task.answer))
    assert variant.lineage.model == "scripted" and variant.lineage.prompt_hash.startswith("p+")

    copied = "Which place does the Orvanne Bridge cross the River Kelm at?"
    with pytest.raises(CheckFailure, match="overlap_not_lower"):
        vary(task, "paraphrased", replying(copied))
    with pytest.raises(CheckFailure, match="question_contains_answer"):
        vary(task, "paraphrased", replying("Is it Tessaly Port?"))
    with pytest.raises(CheckFailure, match="question_unchanged"):
        vary(task, "paraphrased", replying(task.question))


def test_garbage_from_the_generator_fails_the_level_not_the_run():
    with pytest.raises(CheckFailure, match="invalid_structured_output"):
        vary(original(), "paraphrased", ScriptedLLM(lambda *_: "no json here"))


def test_two_hop_reaches_the_answer_through_a_neighbouring_fact():
    task = original()
    question = "Where does the bridge over the river that rises in the Dunmere Hills stand?"
    variant = vary(task, "two_hop", replying(question))
    assert variant.question == question
    assert [e.chunk_id for e in variant.evidence] == ["c1", "c2"]
    assert variant.evidence[1].quote.startswith("The River Kelm rises")
    assert [s.path for s in variant.source] == ["docs/bridge.md", "docs/river.md"]
    knobs = variant.lineage.knobs
    assert (knobs["hops"], knobs["bridge"], knobs["level"]) == (2, "River Kelm", "two_hop")

    for naming in ("the River Kelm", "the Kelm"):
        with pytest.raises(CheckFailure, match="question_names_bridge"):
            vary(task, "two_hop", replying(f"Where does the bridge over {naming} stand?"))
    unrelated = Material(
        title="x", passage=PASSAGE, neighbours=[neighbour("The Dunmere Hills are grazed by sheep.")]
    )
    with pytest.raises(CheckFailure, match="no_bridge_in_neighbours"):
        vary(task, "two_hop", replying(question), material=unrelated)
    holds_answer = Material(
        title="x",
        passage=PASSAGE,
        neighbours=[neighbour("The River Kelm meets the sea at Tessaly Port each day.")],
    )
    with pytest.raises(CheckFailure, match="no_bridge_in_neighbours"):  # would be a shortcut
        vary(task, "two_hop", replying(question), material=holds_answer)


# --- the stage ----------------------------------------------------------------------------


def lineage_of(row) -> Lineage:
    return Lineage.model_validate_json(row["lineage"])


def test_repair_loop_moves_tasks_toward_the_band_and_resumes_without_duplicates(
    tmp_path, oracle_server
):
    home = tmp_path / "home"
    ctx = make_context(home)
    ingest_docs([str(small_corpus(tmp_path))], ctx)
    run_llm_stages(ctx, endpoints_for(oracle_server))

    tasks = {r["task_id"]: r for r in ctx.lake.rows("SELECT task_id, lineage FROM tasks")}
    bands = {
        r["item_id"]: r["reason"]
        for r in ctx.lake.rows("SELECT item_id, reason FROM status WHERE stage = 'calibrate'")
    }
    repairs = ctx.lake.rows("SELECT item_id, reason, detail FROM status WHERE stage = 'repair'")
    assert {r["item_id"] for r in repairs} == {t for t, b in bands.items() if b != "in_band"}
    variants = {t: lineage_of(r) for t, r in tasks.items() if lineage_of(r).repair}
    assert variants and len(variants) == sum(r["reason"] == "repaired" for r in repairs)
    for task_id, lineage in variants.items():
        repair = lineage.repair
        expected = "harder" if bands[repair.parent] == "too_easy" else "easier"
        assert repair.direction == expected
        assert 1 <= repair.step <= ctx.config.repair.max_steps
        assert lineage_of(tasks[repair.root]).repair is None
        assert repair.path[-1] == lineage.knobs["level"]
        assert task_id in bands  # verified and calibrated in the same run
    # easier: a hint first; where a task's hints cannot be given (its answer in its document's
    # title), its passage in the prompt instead
    easier = [v for v in variants.values() if v.repair.direction == "easier"]
    assert easier and any(v.knobs["hint"] != "none" for v in easier)
    assert all(v.knobs["hint"] != "none" or v.knobs["context"] != "search" for v in easier)
    rescued = [t for t in variants if bands[t] == "in_band"]
    assert rescued  # the oracle answers hinted questions more often

    summary = funnel(ctx.lake)["repair"]
    assert summary["variants"] == len(variants) and summary["outcomes"]["repaired"] > 0

    rerun = make_context(home, run_id="run-2")
    requests = len(oracle_server.requests)
    assert not run_llm_stages(rerun, endpoints_for(oracle_server))  # nothing left to do
    assert len(oracle_server.requests) == requests
    assert len(ctx.lake.rows("SELECT task_id FROM tasks")) == len(tasks)

    result = export_taskset(
        ctx.lake, "docqa", home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    exported = exported_rows(ctx, result)
    families = [getattr(lineage_of(r).repair, "root", r["task_id"]) for r in exported]
    assert len(families) == len(set(families))  # one task per original
    exported_ids = {r["task_id"] for r in exported}
    assert set(rescued) <= exported_ids
    assert not {variants[t].repair.root for t in rescued} & exported_ids

    # asked for the hard ones only, a family is represented by its member in that range
    hard = exported_rows(
        ctx,
        export_taskset(
            ctx.lake,
            "hard",
            home / "tasksets",
            (0.0, 0.1),
            kinds=export_kinds(),
            groupings=groupings(),
        ),
    )
    roots = {variants[t].repair.root for t in rescued}
    hard_roots = {
        r["item_id"]
        for r in ctx.lake.rows("SELECT item_id FROM status WHERE stage = 'calibrate'")
        if r["item_id"] in roots and bands[r["item_id"]] == "too_hard"
    }
    assert hard_roots and hard_roots <= {r["task_id"] for r in hard}
    assert all(r["band"] != "in_band" for r in hard)


def exported_rows(ctx, result):
    return ctx.lake.rows(
        f"SELECT task_id, band, lineage FROM read_parquet('{result.path}/data/*.parquet')"
    )


def repair_reasons(ctx):
    rows = ctx.lake.rows(
        "SELECT reason, count(*) AS n FROM status WHERE stage = 'repair' GROUP BY 1"
    )
    return {r["reason"]: r["n"] for r in rows}


def repair_steps(ctx) -> list[int]:
    """The step of every repair variant in the lake."""
    lineages = [lineage_of(r) for r in ctx.lake.rows("SELECT lineage FROM tasks")]
    return [lineage.repair.step for lineage in lineages if lineage.repair]


def test_max_steps_bounds_the_moves_and_raising_it_moves_tasks_on(tmp_path, oracle_server):
    home = tmp_path / "home"
    ctx = make_context(home, repair={"max_steps": 0})
    ingest_docs([str(small_corpus(tmp_path))], ctx)
    run_llm_stages(ctx, endpoints_for(oracle_server))
    bands = ctx.lake.rows("SELECT reason FROM status WHERE stage = 'calibrate'")
    assert any(b["reason"] != "in_band" for b in bands)
    assert repair_reasons(ctx) == {}  # switched off: nothing recorded, nothing settled

    run_llm_stages(
        make_context(home, run_id="run-2", repair={"max_steps": 1}), endpoints_for(oracle_server)
    )
    first = repair_reasons(ctx)
    assert first["repaired"] > 0 and first["step_limit"] > 0
    assert max(repair_steps(ctx)) == 1  # no task moved past the limit

    run_llm_stages(
        make_context(home, run_id="run-3", repair={"max_steps": 2}), endpoints_for(oracle_server)
    )
    assert max(repair_steps(ctx)) == 2  # tasks stopped at the old limit moved on


def test_hackable_tasks_are_not_repaired_and_variants_keep_their_remedy(tmp_path):
    with FakeOpenAIServer(Oracle(hedge=True)) as server:
        ctx = make_context(tmp_path / "home")
        ingest_docs([str(small_corpus(tmp_path))], ctx)
        run_llm_stages(ctx, endpoints_for(server))
    reviews = {
        r["item_id"]: r["reason"]
        for r in ctx.lake.rows("SELECT item_id, reason FROM status WHERE stage = 'review'")
    }
    repaired = {
        r["item_id"] for r in ctx.lake.rows("SELECT item_id FROM status WHERE stage = 'repair'")
    }
    assert repaired and all(reviews[t] == "reviewed" for t in repaired)
    tasks = {t.task_id: t for t in ctx.lake.records("tasks")}
    variants = [t for t in tasks.values() if t.lineage.repair and not t.lineage.remedied]
    of_remedied = [t for t in variants if tasks[t.lineage.repair.parent].lineage.remedied]
    assert of_remedied  # a remedied task was repaired: its variants keep the tighter verifier
    for variant in of_remedied:
        parent = tasks[variant.lineage.repair.parent].verifier
        assert variant.verifier.model_copy(update={"context": parent.context}) == parent
    assert funnel(ctx.lake)["repair"]["variants"] == len(variants)


def test_repair_reports_only_the_rescues_a_hint_deaf_solver_allows(tmp_path):
    """A solver that a hint helps on some questions only, chosen by a hash the pipeline cannot
    see, and a generator whose harder variants of some facts leak the answer or name their
    link: every task, variants included, is measured at its true band; a too-hard task is
    rescued exactly when a hint helps it, the others stop at the step limit out of the band;
    leaking variants are refused with their reasons; the summary counts what happened."""
    oracle = HintDeafOracle()
    ctx = make_context(
        tmp_path / "home", calibrate={"harness": "closed_book", "method": "fixed", "k": 4}
    )
    ingest_docs([str(small_corpus(tmp_path))], ctx)
    with FakeOpenAIServer(oracle) as server:
        run_llm_stages(ctx, endpoints_for(server))

    tasks = {t.task_id: t for t in ctx.lake.records("tasks")}
    statuses = {
        (r["stage"], r["item_id"]): r
        for r in ctx.lake.rows("SELECT stage, item_id, reason, detail FROM status")
    }
    bands = {t: r["reason"] for (stage, t), r in statuses.items() if stage == "calibrate"}
    assert bands == {t: oracle.band(task.question) for t, task in tasks.items()}  # re-measured

    variants = [t for t in tasks.values() if t.lineage.repair]
    family: dict[str, list[Task]] = {}
    for variant in variants:
        family.setdefault(variant.lineage.repair.root, []).append(variant)
    rescued = {
        root
        for root, members in family.items()
        if any(bands[v.task_id] == "in_band" for v in members)
    }
    too_hard = {
        t for t, task in tasks.items() if not task.lineage.repair and bands[t] == "too_hard"
    }
    helped = {t for t in too_hard if oracle.hint_helps(tasks[t].question)}
    assert helped and too_hard - helped
    assert rescued & too_hard == helped
    for root in too_hard - helped:  # walked down the ladder in vain, and says so
        last = max(family[root], key=lambda v: v.lineage.repair.step)
        assert {bands[v.task_id] for v in family[root]} == {"too_hard"}
        assert statuses["repair", last.task_id]["reason"] == "step_limit"

    too_easy = [
        t for t in tasks.values() if not t.lineage.repair and bands[t.task_id] == "too_easy"
    ]
    leaky = [t for t in too_easy if oracle.leaks(t.evidence[0].quote)]
    assert leaky
    for task in leaky:
        detail = statuses["repair", task.task_id]["detail"]
        assert "paraphrased: question_contains_answer" in detail
        assert re.search(r"two_hop: (question_names_bridge|no_bridge_in_neighbours)", detail)
        assert task.task_id not in family
    assert not [v for v in variants if v.answer.lower() in v.question.lower()]

    summary = funnel(ctx.lake)["repair"]
    assert summary["variants"] == len(variants) == summary["outcomes"]["repaired"]
    assert summary["bands"] == Counter(bands[v.task_id] for v in variants)
