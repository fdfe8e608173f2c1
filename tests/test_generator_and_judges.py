import asyncio
import json
import re

import pytest

from data.config import GenerateConfig, VerifyConfig
from data.documents import answer_candidates, generic_words, ranked_candidates
from data.lake import Chunk, ExactOrF1Spec
from data.llm import LLMError
from generators import doc_qa, doc_qa_variants
from generators.checks import CheckFailure, check_answer, check_question
from judges import answerability
from judges.panel import Held
from judges.rewards import score
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM, below_the_bar

TEXT = (
    "The Orvanne Bridge crosses the River Kelm at Tessaly Port. "
    "It opened in 1887 after six years of work. "
    "The engineer Ansel Varrow designed its three stone arches."
)
CHUNK = Chunk(
    chunk_id="c1",
    source_id="s1",
    index=0,
    text=TEXT,
    char_start=0,
    char_end=len(TEXT),
    embedding=[0.0],
)
ONE = GenerateConfig(candidates_per_chunk=1)


def generate(llm, chunk=CHUNK, config=None):
    config = config or GenerateConfig()
    return asyncio.run(doc_qa.generate(chunk, "docs/bridge.md", llm, config))


def first_task(llm, config=ONE):
    (result,) = generate(llm, config=config)
    assert isinstance(result, doc_qa.Candidate), result
    return result.task


def test_answer_candidates_are_names_numbers_and_dates():
    assert answer_candidates("The Museum of Tides opened in Tessaly Port in March 1902.") == [
        "Museum of Tides",
        "Tessaly Port",
        "March 1902",
    ]
    assert answer_candidates("It holds 1,400 litres.") == ["1,400"]
    assert answer_candidates("It is small.") == []


def test_working_backwards_yields_checked_tasks_with_lineage():
    results = generate(ScriptedLLM(Oracle().respond))
    tasks = [r.task for r in results if isinstance(r, doc_qa.Candidate)]
    assert len(results) == 2 and len(tasks) == 2
    for task in tasks:
        assert task.answer in task.evidence[0].quote
        assert task.evidence[0].quote in TEXT
        assert task.answer not in task.prompt[-1].content
        assert task.prompt[0].role == "system" and task.prompt[-1].role == "user"
        assert task.lineage.generator == "doc_qa" and task.lineage.model == "scripted"
        assert task.lineage.knobs["question_style"] == "question"
        assert task.source[0].path == "docs/bridge.md"
        assert score(task.verifier, task.answer, task.answer).reward == 1.0
    assert generate(ScriptedLLM(Oracle().respond)) == results  # deterministic
    assert len({t.task_id for t in tasks}) == 2


def test_answer_must_be_one_of_the_offered_spans():
    def respond(role, messages, params):
        return json.dumps({"answer": "gold"})

    llm = ScriptedLLM(respond)
    with pytest.raises(LLMError) as raised:
        generate(llm, config=ONE)
    assert raised.value.reason == "invalid_structured_output"
    assert len(llm.requests) == 3  # the first reply and two repairs
    schema = llm.requests[0][2]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["answer"]["enum"] == answer_candidates(
        llm.requests[0][1][0]["content"].split('Focus sentence:\n"""\n')[1].split("\n")[0]
    )


def test_auto_style_falls_back_to_a_cloze_when_the_question_gives_the_answer_away():
    def respond(role, messages, params):
        prompt = messages[-1]["content"]
        if "Focus sentence" in prompt:
            options = [line[2:] for line in prompt.splitlines() if line.startswith("- ")]
            return json.dumps({"answer": options[-1]})
        answer = prompt.split("Answer: ", 1)[1].splitlines()[0]
        return json.dumps({"question": f"Is it {answer}?"})

    for task in (first_task(ScriptedLLM(respond)),):
        assert task.lineage.knobs["question_style"] == "cloze"
        question = task.prompt[-1].content
        assert question.startswith("Fill in the blank: ") and "___" in question
        assert task.answer not in question
        before, after = task.verifier.context
        repeated = question.removeprefix("Fill in the blank: ").replace("___", task.answer)
        assert score(task.verifier, repeated, task.answer).reward == 1.0
        assert score(task.verifier, repeated.replace(task.answer, "1999"), task.answer).reward == 0

    strict = GenerateConfig(candidates_per_chunk=1, question_style="question")
    (rejected,) = generate(ScriptedLLM(respond), config=strict)
    assert rejected.reason == "question_contains_answer"


def test_cloze_style_makes_no_question_call():
    llm = ScriptedLLM(Oracle().respond)
    task = first_task(llm, GenerateConfig(candidates_per_chunk=1, question_style="cloze"))
    assert "___" in task.prompt[-1].content
    assert all("Write one quiz question" not in r[1][-1]["content"] for r in llm.requests)


def test_invalid_json_is_repaired_once_then_accepted():
    replies = iter(['{"answer": "Tess', json.dumps({"answer": "Tessaly Port"})])

    def respond(role, messages, params):
        if "Focus sentence" in messages[0]["content"]:
            return next(replies)
        return json.dumps({"question": "Where does the bridge cross the river?"})

    chunk = CHUNK.model_copy(update={"text": TEXT.split(". ")[0] + "."})
    llm = ScriptedLLM(respond)
    (result,) = generate(llm, chunk=chunk, config=ONE)
    assert result.task.answer == "Tessaly Port"
    repair = llm.requests[1][1]
    assert repair[-1]["role"] == "user" and "not valid" in repair[-1]["content"]


def test_chunk_without_fact_sentences_is_rejected_without_calls():
    llm = ScriptedLLM(lambda *a: "{}")
    short = CHUNK.model_copy(update={"text": "Hi. Yes. it is all quite small and grey here."})
    assert generate(llm, short)[0].reason == "no_usable_sentence"
    assert llm.requests == []


def test_checks():
    for args, reason in [
        (("text", "", "a", 5), "empty"),
        (("a b c", "a b c", "a b c d e f", 2), "answer_too_long"),
        (("The sky is blue.", "The sky is green.", "green", 5), "evidence_not_in_chunk"),
        (("The sky is blue.", "The sky is blue.", "red", 5), "answer_not_in_evidence"),
        (
            ("The sky is blue.", "The sky is blue.", "the sky is blue", 5),
            "answer_is_whole_evidence",
        ),
    ]:
        try:
            check_answer(*args)
        except CheckFailure as failure:
            assert failure.reason == reason
        else:
            raise AssertionError(f"expected {reason}")
    check_answer("It opened in 1887.", "it  opened in 1887.", "1887", 5)
    for question, reason in [
        ("When did it open", "not_a_question"),
        ("x" * 301 + "?", "question_too_long"),
        ("Did it open in 1887?", "question_contains_answer"),
    ]:
        try:
            check_question(question, "1887", 300)
        except CheckFailure as failure:
            assert failure.reason == reason
        else:
            raise AssertionError(f"expected {reason}")
    check_question("Fill in the blank: It opened in ___.", "1887", 300)


def test_panel_accepts_answerable_non_leaking_task():
    oracle = Oracle()
    task = first_task(ScriptedLLM(oracle.respond))
    llm = ScriptedLLM(oracle.respond, judges=3)
    decision = asyncio.run(answerability.judge(task, TEXT, llm, VerifyConfig()))
    assert decision.status == "done" and decision.reason == "accepted"
    assert [v.check for v in decision.verdicts] == ["open_book"] * 3 + ["closed_book"] * 3
    assert all(v.judge_model == "scripted" and v.reason for v in decision.verdicts)
    assert {v.judge for v in decision.verdicts} == {"judge:0", "judge:1", "judge:2"}
    opened, closed = decision.consensus
    assert (opened.decision, opened.passes, opened.agreement, opened.rule) == (
        "pass",
        3,
        1.0,
        "majority",
    )
    assert (closed.decision, closed.fails) == ("fail", 3)


def test_closed_book_leak_is_rejected():
    task = first_task(ScriptedLLM(Oracle().respond))
    llm = ScriptedLLM(lambda role, messages, params: task.answer, judges=3)
    decision = asyncio.run(answerability.judge(task, TEXT, llm, VerifyConfig()))
    assert decision.reason == "closed_book_leak"
    assert len(decision.verdicts) == 6


def test_unanswerable_with_source_is_rejected_before_closed_book():
    task = first_task(ScriptedLLM(Oracle().respond))
    llm = ScriptedLLM(lambda role, messages, params: "no idea", judges=3)
    decision = asyncio.run(answerability.judge(task, TEXT, llm, VerifyConfig()))
    assert decision.reason == "not_answerable_with_source"
    assert len(llm.requests) == 3  # the closed-book panel was never asked


def test_verifier_rejects_perturbed_answers():
    spec = ExactOrF1Spec()
    assert score(spec, "1887", "1887").reward == 1.0
    assert score(spec, "1888", "1887").reward == 0.0
    assert score(spec, "", "1887").reward == 0.0


def test_cloze_blanks_the_answer_as_a_whole_word():
    evidence = "The 1887 charter granted 18 acres to the town."
    assert doc_qa.cloze(evidence, "18") == (
        "Fill in the blank: The 1887 charter granted ___ acres to the town."
    )


def test_degenerate_candidates_are_rejected_each_with_its_reason():
    """The candidates a 135M generator made from real documentation (issue 44): a question with
    no content word, a blank over a boolean or a common word, markup a reader left behind."""
    for question, reason in [
        ("...?", "question_without_content"),
        ("Fill in the blank: Note that it is ___.", "question_without_content"),
        ("What does {func}`load_dataset` return for ___?", "markup_in_question"),
        ("Which option of .. function:: takes ___?", "markup_in_question"),
        ("Is the entry hidden with :noindex: in ___?", "markup_in_question"),
        ("What does <code>load</code> take, ___?", "markup_in_question"),
    ]:
        with pytest.raises(CheckFailure) as failure:
            check_question(question, "1887", 300)
        assert failure.value.reason == reason, question
    evidence = "Unfortunately True is returned, and All objects of Carrow Hill stay."
    for answer, reason in [
        ("True", "answer_is_boolean"),
        ("Unfortunately", "answer_is_filler"),
        ("All", "answer_is_filler"),
    ]:
        with pytest.raises(CheckFailure) as failure:
            check_answer(evidence, evidence, answer, 5)
        assert failure.value.reason == reason, answer
    check_answer(evidence, evidence, "Carrow Hill", 5)  # a name still is an answer
    check_question("Fill in the blank: It is made by ___.", "Pellan Instruments", 300)
    check_question("When did it open at 10:30?", "1887", 300)  # a time is not markup


def test_a_single_common_word_is_never_an_answer_candidate_wherever_it_stands():
    sentence = "It returns True. Unfortunately, All of the Tessaly Port ferries stop in March 1902."
    assert answer_candidates(sentence) == ["Tessaly Port", "March 1902"]


def test_a_panel_below_its_controls_does_not_decide_alone():
    """Every judge failed its control items: a fill-in-the-blank of a verbatim sentence meets
    only the closed-book gate (the source answers it by construction); a written question is
    held, and no judge is asked."""
    cloze = GenerateConfig(candidates_per_chunk=1, question_style="cloze")
    cloze_task = first_task(ScriptedLLM(Oracle().respond), cloze)
    written_task = first_task(ScriptedLLM(Oracle().respond))
    assert doc_qa_variants.answered_by_source(cloze_task, TEXT)
    assert not doc_qa_variants.answered_by_source(written_task, TEXT)
    assert not doc_qa_variants.answered_by_source(cloze_task, "Another passage altogether.")

    unable = below_the_bar(ScriptedLLM(lambda role, messages, params: "no idea", judges=3))
    accepted = asyncio.run(
        answerability.judge(cloze_task, TEXT, unable, VerifyConfig(), answered_by_source=True)
    )
    assert (accepted.status, accepted.reason) == ("done", "accepted_by_construction")
    assert [v.check for v in accepted.verdicts] == ["closed_book"] * 3
    assert "by construction" in accepted.detail

    leaking = below_the_bar(ScriptedLLM(lambda role, messages, params: cloze_task.answer, judges=3))
    leaked = asyncio.run(
        answerability.judge(cloze_task, TEXT, leaking, VerifyConfig(), answered_by_source=True)
    )
    assert leaked.reason == "closed_book_leak"  # the gate still rejects

    with pytest.raises(Held) as held:
        asyncio.run(answerability.judge(written_task, TEXT, unable, VerifyConfig()))
    assert held.value.reason == "held_judge_below_controls"
    assert "stronger judge" in held.value.detail and len(unable.requests) == 3  # the gate's alone


def test_the_most_specific_spans_are_offered_first():
    sentence = "The Museum of Tides in Tessaly Port held 1,400 Shells from Kelm in March 1902."
    assert ranked_candidates(sentence) == [
        "March 1902",
        "1,400",
        "Museum of Tides",
        "Tessaly Port",
        "Shells",
        "Kelm",
    ]
    seen = []
    oracle = Oracle()

    def respond(role, messages, params):
        seen.append(messages[-1]["content"])
        return oracle.respond(role, messages, params)

    generate(ScriptedLLM(respond), chunk=CHUNK.model_copy(update={"text": sentence}), config=ONE)
    offered = re.findall(r"^- (.+)$", next(p for p in seen if "Focus sentence:" in p), re.M)
    assert offered == ranked_candidates(sentence)[: doc_qa.MAX_ANSWER_OPTIONS]


def test_a_word_the_whole_corpus_names_is_never_the_answer():
    documents = [f"The Orvanne Bridge tolls run on Python since {1880 + n}." for n in range(4)]
    documents.append("The River Kelm floods in March 1902, as Python logs show.")
    generic = generic_words(documents)
    assert generic == {"Python"}  # in every document; names and years that vary are kept
    assert generic_words(documents[:4]) == frozenset()  # too small a corpus to tell
    sentence = "The toll office runs on Python since 1887."
    assert answer_candidates(sentence, generic) == ["1887"]
    only_generic = "This limitation comes from the typing system of Python."
    assert doc_qa.focus_sentences(only_generic) and not doc_qa.focus_sentences(
        only_generic, generic
    )


def test_a_sentence_that_introduces_code_is_not_a_focus_sentence():
    assert doc_qa.focus_sentences("The Orvanne Bridge opened in 1887 like this:") == []
    spans = answer_candidates("With Mypy, the check runs in Python 3.12.")
    assert spans == ["Mypy", "Python", "3.12"]  # not "With Mypy"; the version whole


def test_a_capital_after_a_colon_or_a_possessive_of_a_generic_word_is_no_answer():
    assert answer_candidates("Changed in version 8.4.0: Added the capture parameter.") == ["8.4.0"]
    assert answer_candidates("With Python's reflection it works.", frozenset({"Python"})) == []
    with pytest.raises(CheckFailure, match="markup_in_question"):
        check_question("Fill in the blank: the `capture` parameter came in ___.", "8.4.0", 300)
