"""Judge verdict variance: open-book verdicts re-asked with other seeds."""

from __future__ import annotations

from data.config import FoundryConfig
from data.llm import role_configs
from flows.cli import main
from flows.judge_variance import measure_variance, variance_sample
from judges.agreement import format_judge_report, judge_report
from judges.variance import reseeded
from sources.documents import ingest_docs
from tests.conftest import SAMPLE_DOCS, endpoints_for, make_context, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle
from tests.fakes.scripted_llm import fake_endpoints


def odd_seeds_misread(oracle: Oracle):
    """The oracle, except that an open-book judge asked with an odd seed answers wrongly."""

    def respond(body):
        prompt = body["messages"][-1]["content"]
        if prompt.startswith("Read the passage") and body.get("seed", 0) % 2 == 1:
            return "a misreading"
        return oracle(body)

    return respond


def test_judge_settings_reach_the_endpoints_and_reseeding_moves_only_judges():
    config = FoundryConfig.model_validate(
        {"roles": {"judges": [{"base_url": "http://x", "temperature": 0.7, "seed": 4}]}}
    )
    assert role_configs(config)["judge:0"].temperature == 0.7
    endpoints = fake_endpoints("http://judges.invalid/v1", judges=2)
    shifted = reseeded(endpoints, 3, temperature=0.5)
    assert [(shifted[r].seed, shifted[r].temperature) for r in ("judge:0", "judge:1")] == [
        (3, 0.5),
        (3, 0.5),
    ]
    assert shifted["solver"] == endpoints["solver"]


def test_flips_under_another_seed_are_counted_per_judge(tmp_path, capsys):
    home = tmp_path / "home"
    with FakeOpenAIServer(odd_seeds_misread(Oracle())) as server:
        endpoints = endpoints_for(server, judges=2)
        ctx = make_context(home, calibrate={"k": 2})
        ingest_docs([str(SAMPLE_DOCS / "orvanne-bridge.md")], ctx)
        run_llm_stages(ctx, endpoints)
        sample = variance_sample(ctx, tasks=5)
        reruns = measure_variance(ctx, endpoints, sample, seeds=2, temperature=None)

    assert 0 < len(sample.tasks) <= 5
    assert len(reruns) == 2 * 2 * len(sample.tasks)  # seeds x judges x tasks
    passed_first = {k for k, v in sample.original.items() if v == "pass"}
    shown = {t.task_id for t, _ in sample.tasks}
    expected = sum(1 for task_id, _ in passed_first if task_id in shown)  # per judge, seed 1
    figures = judge_report(ctx.lake)["seed_variance"]
    assert set(figures) == {"judge:0", "judge:1"}
    for judge in figures.values():
        assert judge["compared"] == 2 * len(sample.tasks)
        assert judge["flips"] == expected / 2 > 0  # `expected` counted both judges
    assert {(r.seed, r.decision) for r in reruns if r.seed == 1} == {(1, "fail")}

    assert main(["judges", "report", "--home", str(home)]) == 0
    assert f"seed variance judge:0: {int(expected / 2)} of" in capsys.readouterr().out
    assert "seed variance" in format_judge_report(judge_report(ctx.lake))
