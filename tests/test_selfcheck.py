import asyncio

from data.lake import ExactOrF1Spec
from generators.checks import CheckFailure, check_question
from judges.selfcheck import self_check
from judges.verifier_types.answers import off_by_one, perturbations, wrong_entity
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM
from tests.test_generator_and_judges import TEXT, first_task


def test_perturbations():
    assert off_by_one("2,200 watts") == "2,201 watts"
    assert off_by_one("March 2019") == "March 2020"
    assert off_by_one("09") == "10"
    assert off_by_one("Tessaly Port") is None
    assert wrong_entity("Ansel Varrow", TEXT) == "Orvanne Bridge"
    assert wrong_entity("1887", TEXT) is None  # the passage has no other number
    assert [name for name, _ in perturbations("1887", TEXT)] == ["empty", "off_by_one"]


def check(task, passage=TEXT):
    return asyncio.run(self_check(task, ScriptedLLM(Oracle().respond), passage))


def test_sound_verifier_passes_the_self_check():
    task = first_task(ScriptedLLM(Oracle().respond))
    assert check(task) is None


def test_a_verifier_that_accepts_anything_fails_the_self_check():
    task = first_task(ScriptedLLM(Oracle().respond))
    lax = task.model_copy(update={"verifier": ExactOrF1Spec(f1_threshold=0.0)})
    failure = check(lax)
    assert failure is not None and "perturbation" in failure


def test_a_verifier_that_rejects_its_gold_fails_the_self_check():
    task = first_task(ScriptedLLM(Oracle().respond))
    broken = task.model_copy(update={"answer": ""})
    assert check(broken) == "gold answer rejected"


def test_questions_that_imply_their_answer_are_rejected():
    for question, answer in [
        ("Who designed the Varrows bridge?", "Varrow"),
        ("When did it open, 1,887?", "1887"),
        ("Which port city, Tessaly, hosts it?", "Tessaly Port"),
    ]:
        try:
            check_question(question, answer, 300)
        except CheckFailure as failure:
            assert failure.reason == "question_implies_answer", question
        else:
            raise AssertionError(question)
    check_question("Which town is home to Halvard Bakeries?", "Tessaly Port", 300)
    check_question("How many shops did it have in 2023?", "74", 300)
