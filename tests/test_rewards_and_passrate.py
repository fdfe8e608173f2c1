import math

import pytest

from data.lake import ExactOrF1Spec, LLMEquivalenceSpec, UnitTestsSpec
from data.runtime.answer_match import exact_match, final_answer, normalize_answer, token_f1
from judges.passrate import band, learnability, pass_at_k, pool, wilson_interval
from judges.rewards import score

SPEC = ExactOrF1Spec()


def test_normalisation():
    assert normalize_answer("The  Orvanne Bridge.") == "orvanne bridge"
    assert normalize_answer("2,200") == normalize_answer("2200")


def test_gold_passes_its_own_verifier_and_perturbations_fail():
    gold = "Tessaly Port"
    assert score(SPEC, gold, gold).reward == 1.0
    assert score(SPEC, "Answer: tessaly port.", gold).reward == 1.0
    assert score(SPEC, "Dunmere Falls", gold).reward == 0.0
    assert score(SPEC, "", gold).reward == 0.0
    assert score(SPEC, "1888", "1887").reward == 0.0


def test_f1_threshold():
    assert token_f1("the old Orvanne stone bridge", "Orvanne bridge") == pytest.approx(2 / 3)
    assert score(SPEC, "old Orvanne stone bridge", "Orvanne bridge").reward == 1.0
    assert (
        score(ExactOrF1Spec(f1_threshold=0.9), "old Orvanne stone bridge", "Orvanne bridge").reward
        == 0.0
    )
    assert not exact_match("", "")


def test_final_answer_takes_first_line():
    assert final_answer("\n Answer: 1887\nBecause the record says so.") == "1887"


def test_wilson_interval():
    low, high = wilson_interval(0, 8, 0.9)
    assert low == 0.0 and 0.2 < high < 0.35
    low, high = wilson_interval(4, 8, 0.9)
    assert low < 0.5 < high and math.isclose(low + high, 1.0)
    assert wilson_interval(0, 0, 0.9) == (0.0, 1.0)


def test_pass_at_k():
    assert pass_at_k(8, 0, 8) == 0.0
    assert pass_at_k(8, 1, 8) == 1.0
    assert pass_at_k(4, 2, 1) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_bands_and_pools():
    assert band(0.0, 0.2, 0.8) == "too_hard"
    assert band(0.2, 0.2, 0.8) == "in_band"
    assert band(0.81, 0.2, 0.8) == "too_easy"
    assert [pool(p) for p in (0.25, 0.5, 0.76)] == ["hard", "normal", "easy"]
    assert learnability(0.5) == 1.0 and learnability(1.0) == 0.0


def test_verifier_reward_has_the_trl_signature_and_skips_what_needs_a_model():
    from judges.verifier_types.trainer_rewards import verifier_reward

    specs = [
        ExactOrF1Spec().model_dump_json(),
        ExactOrF1Spec(context=["Built in", "."]).model_dump(),
        LLMEquivalenceSpec().model_dump_json(),
        UnitTestsSpec().model_dump_json(),
    ]
    completions = [
        "Answer: Tessaly Port",
        [{"role": "assistant", "content": "Built in 1887."}],
        "Tessaly Port",
        "diff",
    ]
    rewards = verifier_reward(
        [None] * 4, completions, verifier=specs, solution=["Tessaly Port", "1887", "x", "y"]
    )
    assert rewards == [1.0, 1.0, None, None]
    with pytest.raises(ValueError, match="solution"):
        verifier_reward([None], ["x"], verifier=specs[:1])


@pytest.mark.parametrize(
    ("reply", "gold", "reward"),
    [
        ("1.5", "15", 0.0),  # normalising alone would drop the point and accept it
        ("2,200", "2200", 1.0),
        ("$2,200.00", "2200", 1.0),
        ("Answer: 1843", "1842", 0.0),
        ("-3", "-3.0", 1.0),
        ("2200 people", "2200", 1.0),  # not a plain number: token F1 decides
    ],
)
def test_plain_numbers_are_compared_by_value(reply, gold, reward):
    assert score(SPEC, reply, gold).reward == reward
