"""Review: rubric items from failed attempts, reward-hack mining and the verifier's remedy."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from data.export import export_taskset
from data.lake import AnswerSpec, Attempt, ExactOrF1Spec, LLMEquivalenceSpec, Usage
from data.llm import LLMError
from families import export_kinds
from judges import hacks, rubrics
from judges.panel import Held
from judges.review import review
from judges.review_report import format_review_report, review_report
from judges.rewards import score
from judges.rubrics import rubric_item
from judges.verifier_types import grade
from sources import groupings
from sources.documents import ingest_docs
from tests.conftest import make_context, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM, below_the_bar, fake_endpoints
from tests.test_generator_and_judges import first_task
from tests.test_pipeline import small_corpus


def a_task(spec: type[AnswerSpec] = ExactOrF1Spec):
    task = first_task(ScriptedLLM(Oracle().respond))
    return task.model_copy(update={"verifier": spec()})


def attempts_of(task, *responses):
    return [
        Attempt(
            attempt_id=f"attempt-{i}",
            task_id=task.task_id,
            index=i,
            harness="closed_book",
            solver_model="solver",
            temperature=0.8,
            seed=i,
            response=text,
            reward=score(task.verifier, text, task.answer).reward,
            usage=Usage(),
        )
        for i, text in enumerate(responses)
    ]


def block(text, tag):
    return re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, flags=re.S).group(1)


def reviewer(*, hack_reply=None, rubric_reply=None, follows_rubric=True):
    """A scripted judge: rubric, hack audit and equivalence prompts, each answered on cue."""

    def respond(role, messages, params):
        user = next(m["content"] for m in messages if m["role"] == "user")  # repairs come later
        if '<attempt number="' in user:
            default = {"items": [{"attempt": 1, "category": "wrong_answer", "failure": "wrong"}]}
            return json.dumps(rubric_reply or default)
        if "The checker marked this attempt correct" in user:
            hedged = "," in block(user, "attempt")
            default = {
                "genuine": not hedged,
                "pattern": "hedged_list" if hedged else "none",
                "reason": "audited",
            }
            return hack_reply(role) if hack_reply else json.dumps(default)
        attempt = block(user, "attempt")
        strict = follows_rubric and hacks.PATTERN_ITEMS["hedged_list"] in user
        return json.dumps({"equivalent": not (strict and "," in attempt), "reason": "compared"})

    return respond


def run_review(task, attempts, respond, judges=1):
    llm = ScriptedLLM(respond, judges=judges)
    return asyncio.run(review(task, attempts, llm, hacks.ANSWERS)), llm


def test_a_vague_hedge_still_games_token_f1_where_a_list_of_candidates_does_not():
    task = a_task()
    assert score(task.verifier, f"{task.answer}, something", task.answer).reward == 1.0
    assert score(task.verifier, f"{task.answer}, Other Place", task.answer).reward == 0.0
    assert score(task.verifier, task.answer, task.answer).exact


def test_rubric_items_come_from_distinct_failed_attempts_and_name_them():
    task = a_task()
    attempts = attempts_of(task, "Wrong One", task.answer, "wrong one", "Wrong Two")
    rubric = {
        "items": [
            {"attempt": 1, "category": "wrong_answer", "failure": "names another place"},
            {"attempt": 2, "category": "wrong_answer", "failure": "guesses"},  # same item again
            {"attempt": 2, "category": "several_answers", "failure": "says 1878 instead of 1887"},
        ]
    }
    result, llm = run_review(task, attempts, reviewer(rubric_reply=rubric))
    (prompt,) = [m for _, m, _ in llm.requests if '<attempt number="' in m[-1]["content"]]
    assert prompt[-1]["content"].count("<attempt number=") == 2  # distinct failures only
    assert task.answer not in re.findall(r'<attempt number="\d">\n(.*?)\n', prompt[-1]["content"])
    items = {(r.item, r.category, r.failure, r.attempt_id) for r in result.rubric}
    assert items == {
        (rubric_item("wrong_answer", task), "wrong_answer", "names another place", "attempt-0"),
        # the judge copied the prompt's example: its category stands in for the description
        (rubrics.ONE_ANSWER, "several_answers", "several answers", "attempt-3"),
    }
    assert rubric_item("wrong_answer", task).endswith(task.answer)
    assert result.review.rubric_items == 2 and result.review.rubric_error == ""


def test_a_rubric_naming_an_attempt_it_was_not_shown_is_rejected_and_recorded():
    task = a_task()
    bad = {"items": [{"attempt": 3, "category": "wrong_answer", "failure": "x"}]}
    result, _ = run_review(task, attempts_of(task, "Wrong"), reviewer(rubric_reply=bad))
    assert result.rubric == []
    assert "invalid_structured_output" in result.review.rubric_error
    assert not result.review.hackable  # the rest of the review still happened


def test_only_rewarded_non_exact_attempts_go_to_the_hack_panel():
    task = a_task()
    result, llm = run_review(task, attempts_of(task, task.answer, task.answer), reviewer())
    assert llm.requests == []  # no failures, no suspicious passes: nothing to ask
    assert result.review.remedy == "none_needed" and result.review.checked_attempts == 0


def test_judges_below_the_control_bar_review_nothing():
    """While every judge is below its control bar, a review that must clear a suspicious pass
    is held, a failed attempt's rubric is not extracted (and the review says so), and one that
    needs no judge still ends; no judge is asked."""
    task = a_task()
    hedge = f"{task.answer}, something"
    weak = below_the_bar(ScriptedLLM(reviewer()))
    with pytest.raises(Held):
        asyncio.run(review(task, attempts_of(task, hedge), weak, hacks.ANSWERS))
    assert weak.requests == []
    weak = below_the_bar(ScriptedLLM(reviewer()))
    failed = asyncio.run(review(task, attempts_of(task, "Wrong"), weak, hacks.ANSWERS))
    assert failed.rubric == [] and weak.requests == []
    assert failed.review.rubric_error.startswith("not extracted: held_judge_below_controls")
    weak = below_the_bar(ScriptedLLM(reviewer()))
    result = asyncio.run(review(task, attempts_of(task, task.answer), weak, hacks.ANSWERS))
    assert result.review.remedy == "none_needed" and weak.requests == []


def test_a_hedge_is_flagged_and_exact_match_only_closes_it():
    task = a_task()
    hedge = f"{task.answer}, something"
    result, _ = run_review(task, attempts_of(task, task.answer, hedge, "Wrong"), reviewer())
    assert result.review.hackable and result.review.hack_attempts == ["attempt-1"]
    assert result.review.checked_attempts == 1
    assert [v.decision for v in result.verdicts] == ["hack"]
    assert result.verdicts[0].pattern == "hedged_list"
    remedied = result.remedied
    assert result.review.remedy == "exact_match_only"
    assert result.review.remedied_task_id == remedied.task_id != task.task_id
    assert remedied.verifier.f1_threshold == 1.0
    assert remedied.lineage.remedied.parent == task.task_id
    assert score(remedied.verifier, hedge, task.answer).reward == 0.0
    assert score(remedied.verifier, task.answer, task.answer).reward == 1.0


def test_the_equivalence_judge_enforces_a_rubric_against_token_f1_matches():
    task = a_task(LLMEquivalenceSpec)
    hedge = f"{task.answer}, something"
    # without a rubric the token-F1 match stands and no judge is asked
    llm = ScriptedLLM(reviewer())
    assert asyncio.run(grade(task, hedge, llm)).reward == 1.0 and llm.requests == []
    strict = task.model_copy(update={"verifier": LLMEquivalenceSpec(rubric=["a <b> & c"])})
    asyncio.run(grade(strict, hedge, llm))
    (_, messages, _) = llm.requests[-1]
    assert "<rubric>\n- a &lt;b&gt; &amp; c\n</rubric>" in messages[-1]["content"]
    assert asyncio.run(grade(strict, task.answer, llm)).reward == 1.0  # exact: no judge needed
    assert len(llm.requests) == 1


def test_an_equivalence_task_is_remedied_with_a_rubric():
    task = a_task(LLMEquivalenceSpec)
    hedge = f"{task.answer}, something"
    result, _ = run_review(task, attempts_of(task, hedge, "Wrong"), reviewer())
    assert result.review.remedy == "equivalence_rubric"
    rubric = result.remedied.verifier.rubric
    assert rubric == [rubric_item("wrong_answer", task), hacks.PATTERN_ITEMS["hedged_list"]]


def test_a_hack_no_remedy_closes_leaves_the_task_hackable():
    task = a_task()
    hedge = f"{task.answer}, something"
    result, _ = run_review(task, attempts_of(task, hedge), reviewer(follows_rubric=False))
    # exact match only would close this hedge, so give the hedge the gold's exact tokens
    assert result.review.remedy == "exact_match_only"
    reordered = " ".join(reversed(task.answer.split())) + ","
    if reordered.rstrip(",") == task.answer:
        pytest.skip("a one-word answer cannot be reordered")
    strict = task.model_copy(update={"verifier": ExactOrF1Spec(f1_threshold=1.0)})
    result, _ = run_review(strict, attempts_of(strict, reordered), reviewer(follows_rubric=False))
    assert result.review.hackable and result.review.remedy == "none_held"
    assert result.remedied is None


def test_a_judge_error_is_neither_genuine_nor_hack():
    task = a_task()
    attempts = attempts_of(task, f"{task.answer}, something")

    def one_broken(role):
        if role == "judge:0":
            return "not json at all"
        return json.dumps({"genuine": False, "pattern": "hedged_list", "reason": "hedges"})

    with pytest.raises(LLMError) as raised:  # 1 hack, 1 error of 2: could go either way
        run_review(task, attempts, reviewer(hack_reply=one_broken), judges=2)
    assert raised.value.reason == "judge_undecided"
    result, _ = run_review(task, attempts, reviewer(hack_reply=one_broken), judges=3)
    assert [v.decision for v in result.verdicts] == ["error", "hack", "hack"]
    assert result.review.hackable  # 2 of 3 say hack whatever the third would have said


def test_pipeline_remedies_hacked_tasks_and_reverifies_them_in_the_same_run(tmp_path):
    home = tmp_path / "home"
    ctx = make_context(home, calibrate={"k": 4})
    ingest_docs([str(small_corpus(tmp_path))], ctx)
    with FakeOpenAIServer(Oracle(hedge=True)) as server:
        counts = run_llm_stages(ctx, fake_endpoints(server.base_url, model="fake-model"))
    assert counts["rejected:hackable_remedied"] > 0
    remedied = ctx.lake.rows(
        "SELECT r.task_id, r.remedied_task_id FROM reviews r WHERE remedy = 'exact_match_only'"
    )
    verified = ctx.lake.finished_items("verify")
    assert remedied and all(r["remedied_task_id"] in verified for r in remedied)

    result = export_taskset(
        ctx.lake, "docqa", home / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    rows = ctx.lake.rows(f"SELECT * FROM read_parquet('{result.path}/data/*.parquet')")
    exported = {r["task_id"] for r in rows}
    assert not exported & {r["task_id"] for r in remedied}  # hacked originals stay behind
    assert exported & {r["remedied_task_id"] for r in remedied}
    attempt_ids = {r["attempt_id"] for r in ctx.lake.rows("SELECT attempt_id FROM attempts")}
    for row in rows:
        assert row["hackable"] is False
        for item in json.loads(row["rubric"]):
            assert item["attempt_id"] in attempt_ids and item["item"].endswith(row["answer"])
    assert any(json.loads(r["rubric"]) for r in rows)

    report = review_report(ctx.lake)
    assert report["hackable"] == len(remedied)
    assert report["remedies"] == {"exact_match_only": len(remedied)}
    assert report["hack_patterns"] == {"hedged_list": report["hack_votes"]["hack"]}
    assert f"hackable tasks: {len(remedied)}" in format_review_report(report)
