import asyncio

import pytest

from data.config import VerifyConfig
from data.llm import LLMError
from judges import answerability
from judges.agreement import cohen_kappa, format_judge_report, judge_report
from judges.consensus import decide, majority, quorum, rule_from, unanimous
from sources.documents import ingest_docs
from tests.conftest import SAMPLE_DOCS, endpoints_for, make_context, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import ScriptedLLM
from tests.test_generator_and_judges import TEXT, first_task


@pytest.mark.parametrize(
    ("votes", "rule", "outcome"),
    [
        (["pass", "pass", "fail"], majority, "pass"),
        (["pass", "fail"], majority, "fail"),  # a tie is no majority
        (["pass", "pass", "fail"], unanimous, "fail"),
        (["pass", "pass", "pass"], unanimous, "pass"),
        (["pass", "fail", "fail"], quorum(1), "pass"),
        (["pass", "fail", "fail"], quorum(2), "fail"),
    ],
)
def test_rules(votes, rule, outcome):
    assert decide(votes, rule).outcome == outcome


def test_errors_are_not_votes():
    robust = decide(["pass", "pass", "error"], majority)  # 2 of 3 whatever the third says
    assert (robust.outcome, robust.errors, robust.agreement) == ("pass", 1, 1.0)
    open_question = decide(["pass", "error", "error"], majority)
    assert open_question.outcome == "undecided"
    assert decide(["fail", "error", "fail"], unanimous).outcome == "fail"
    assert decide(["pass", "error"], unanimous).outcome == "undecided"
    split = decide(["pass", "pass", "fail"], majority)
    assert split.agreement == pytest.approx(2 / 3)


def test_rule_from_config():
    assert rule_from(VerifyConfig())[0] == "majority"
    assert rule_from(VerifyConfig(consensus="quorum", quorum=3))[0] == "quorum:3"


def failing_judges(*broken: str):
    """The oracle, except that the `broken` judge roles always raise an LLM error."""
    oracle = Oracle()

    def respond(role, messages, params):
        if role in broken:
            raise LLMError("http_503", "judge endpoint down")
        return oracle.respond(role, messages, params)

    return oracle, respond


def test_a_judge_error_is_recorded_as_an_error_not_a_fail():
    oracle, respond = failing_judges("judge:2")
    task = first_task(ScriptedLLM(oracle.respond))
    decision = asyncio.run(
        answerability.judge(task, TEXT, ScriptedLLM(respond, judges=3), VerifyConfig())
    )
    assert decision.status == "done"
    errors = [v for v in decision.verdicts if v.judge == "judge:2"]
    assert [v.decision for v in errors] == ["error", "error"]
    assert "http_503" in errors[0].reason
    assert decision.consensus[0].errors == 1 and decision.consensus[0].passes == 2


def test_errors_that_could_flip_the_decision_leave_the_task_for_a_retry():
    oracle, respond = failing_judges("judge:1", "judge:2")
    task = first_task(ScriptedLLM(oracle.respond))
    decision = asyncio.run(
        answerability.judge(task, TEXT, ScriptedLLM(respond, judges=3), VerifyConfig())
    )
    assert (decision.status, decision.reason) == ("failed", "judge_error")
    assert decision.consensus[0].decision == "undecided"


def test_unanimity_rejects_a_split_panel():
    oracle = Oracle()
    task = first_task(ScriptedLLM(oracle.respond))

    def respond(role, messages, params):
        return "wrong" if role == "judge:0" else oracle.respond(role, messages, params)

    majority_says = asyncio.run(
        answerability.judge(task, TEXT, ScriptedLLM(respond, judges=3), VerifyConfig())
    )
    unanimity_says = asyncio.run(
        answerability.judge(
            task, TEXT, ScriptedLLM(respond, judges=3), VerifyConfig(consensus="unanimous")
        )
    )
    assert majority_says.status == "done"
    assert unanimity_says.reason == "not_answerable_with_source"


def test_cohen_kappa():
    assert cohen_kappa(["p", "p", "f", "f"], ["p", "f", "f", "f"]) == pytest.approx(0.5)
    assert cohen_kappa(["p", "f"], ["p", "f"]) == 1.0
    assert cohen_kappa(["p", "p"], ["p", "p"]) is None
    assert cohen_kappa([], []) is None
    with pytest.raises(ValueError):
        cohen_kappa(["p"], [])


def test_judge_report_over_a_two_judge_panel(tmp_path):
    with FakeOpenAIServer(Oracle()) as server:
        ctx = make_context(tmp_path / "home", calibrate={"k": 2})
        ingest_docs([str(SAMPLE_DOCS / "orvanne-bridge.md")], ctx)
        run_llm_stages(ctx, endpoints_for(server, judges=2))
    report = judge_report(ctx.lake)
    assert set(report["judges"]) == {"judge:0", "judge:1"}
    for figures in report["judges"].values():
        assert figures["error_rate"] == 0 and figures["agreement_with_consensus"] == 1.0
    (pair,) = report["pairs"].values()
    assert pair["items"] > 0 and pair["kappa"] in (1.0, None)
    assert report["panel"]["open_book"]["undecided"] == 0
    assert "judge:1" in format_judge_report(report)
