"""`foundry loop` on the fake server: two rounds whose policies are given (no training), each
round's taskset measured against the round's policy, and the next round's generation drawn
from the new policy's failures on train tasks."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from data.lake import Lake
from data.projections import last_user_message
from flows.cli import main
from flows.steering import failure_kind, steer
from generators.doc_qa import LADDER
from tests.conftest import SAMPLE_DOCS
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle

CONFIG = """
[generate]
max_chunks = 6
[calibrate]
method = "fixed"
k = 4
[export]
eval_share = 0.5
[scope]
kinds = ["doc_qa"]
"""


class _Solvers:
    """The oracle as every model; it learns the answers of the tasks it did not write from the
    lake (`learn`), so any policy can be right."""

    def __init__(self) -> None:
        self.oracle = Oracle()
        self.requests = 0

    def learn(self, lake: Lake) -> None:
        for row in lake.rows("SELECT prompt, answer FROM tasks"):
            self.oracle.answers.setdefault(last_user_message(row["prompt"]), row["answer"])

    def __call__(self, body):
        self.requests += 1
        return self.oracle(body)


@pytest.fixture
def loop_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    config = tmp_path / "foundry.toml"
    config.write_text(CONFIG)
    solvers = _Solvers()
    with FakeOpenAIServer(solvers) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("FOUNDRY_MODEL", "fake-model")
        docs = [str(d) for d in sorted(SAMPLE_DOCS.glob("*.md"))[:4]]
        assert main(["ingest", "docs", *docs, "--home", str(home), "--config", str(config)]) == 0
        yield home, config, server.base_url, solvers


def _rows(version) -> list[dict]:
    manifest = json.loads((version / "manifest.json").read_text())
    return [r for part in manifest["files"] for r in pq.read_table(version / part).to_pylist()]


def test_two_rounds_steer_by_failures_and_measure_against_the_last_policy(loop_home, capsys):
    home, config, url, solvers = loop_home
    command = ["loop", "--home", str(home), "--config", str(config), "--json"]
    command += ["--policy", f"fake-model@{url}", "--trainer", "given", "--attempts", "2"]
    command += ["--given", f"policy-one@{url}", "--given", f"policy-two@{url}"]

    assert main(command) == 0

    result = json.loads(capsys.readouterr().out)
    first, second = result["rounds"]
    assert (first["policy"], first["trained"]) == ("fake-model", "policy-one")
    assert (second["policy"], second["trained"]) == ("policy-one", "policy-two")
    lake = Lake(home)
    root = home / "tasksets" / "docqa-loop"
    one, two = root / "v0001", root / "v0002"
    assert json.loads((two / "manifest.json").read_text())["loop"] == {
        "loop": "loop",
        "round": 2,
        "policy": "policy-one",
    }
    # round two's taskset is measured against the policy round one made
    rows_two = _rows(two)
    assert rows_two and {r["solver_model"] for r in rows_two} == {"policy-one"}
    measured = lake.rows("SELECT task_id FROM difficulty WHERE stage = 'calibrate:policy-one'")
    assert {r["task_id"] for r in rows_two} <= {r["task_id"] for r in measured}

    # round two's generation drew on round one's failures, on train tasks only
    rows_one = _rows(one)
    train_one = {r["task_id"] for r in rows_one if r["split"] == "train"}
    failed = {
        a["attempt_id"]: a
        for a in lake.rows(
            "SELECT * FROM attempts WHERE stage = 'calibrate:policy-one' AND reward < 1.0"
        )
    }
    targeted = [
        json.loads(r["lineage"])["target"]
        for r in lake.rows("SELECT lineage FROM tasks")
        if json.loads(r["lineage"]).get("target")
    ]
    from_round_one = [t for t in targeted if t["round"] == 1]
    assert from_round_one
    for target in from_round_one:
        assert target["policy"] == "policy-one" and target["task_id"] in train_one
        attempt = failed[target["attempt_id"]]
        assert attempt["task_id"] == target["task_id"]
        assert target["failure"] == failure_kind(attempt["reason"])
    rubrics: dict[str, set[str]] = {}
    for row in lake.rows("SELECT task_id, item FROM rubrics"):
        rubrics.setdefault(row["task_id"], set()).add(row["item"])
    assert any(t["rubric"] for t in from_round_one)
    assert all(set(t["rubric"]) == rubrics.get(t["task_id"], set()) for t in from_round_one)
    in_two = [json.loads(r["lineage"]).get("target") for r in rows_two]
    assert any(t and t["round"] == 1 for t in in_two)
    # counted when round one ended; a later repair variant of a targeted task keeps its target
    assert 0 < sum(first["targets"].values()) <= len(from_round_one)
    assert first["steered"].get("done:targeted", 0) > 0
    assert first["episodes"] > 0
    assert lake.rows("SELECT count(*) AS n FROM traces")[0]["n"] > 0

    # both policies of each round evaluated on its eval split
    evaluations = {(e["taskset"], e["policy"]) for e in lake.rows("SELECT * FROM evaluations")}
    assert {("docqa-loop/v0001", "fake-model"), ("docqa-loop/v0001", "policy-one")} <= evaluations
    assert ("docqa-loop/v0002", "policy-two") in evaluations
    assert first["before"] is not None and len(first["before_ci"]) == 2

    # a re-run finds both rounds done and asks nothing
    asked = solvers.requests
    assert main(command) == 0
    assert solvers.requests == asked
    assert json.loads(capsys.readouterr().out)["rounds"] == result["rounds"]

    assert main(["stats", "--home", str(home)]) == 0
    assert "loop round 2" in capsys.readouterr().out
    page = home / "report.html"
    assert main(["report", "--home", str(home), "--taskset", str(two), "--out", str(page)]) == 0
    assert 'id="loop"' in page.read_text()


def test_a_loop_that_would_train_a_served_policy_is_refused(tmp_path, capsys):
    command = ["loop", "--home", str(tmp_path / "home"), "--policy", "model@http://x/v1"]
    assert main(command) == 2
    assert "not trainable" in capsys.readouterr().err


def test_steering_moves_toward_the_band_and_targets_failures():
    from data.records import Lineage, TargetRef

    lineage = Lineage(
        generator="doc_qa", generator_version="2", prompt_hash="p", model="m", seed="s",
        knobs={"level": "base"},
    )  # fmt: skip
    failure = TargetRef(
        round=1, policy="p", task_id="t", attempt_id="a", failure="empty answer", reason="x"
    )

    harder = steer("too_easy", None, lineage, LADDER, max_steps=2)
    assert harder.direction == "harder" and harder.levels[0].name == "paraphrased"
    assert harder.target is None
    easier = steer("too_hard", failure, lineage, LADDER, max_steps=2)
    assert easier.direction == "easier" and easier.levels[0].name == "pointed"
    assert easier.target == failure
    sibling = steer("in_band", failure, lineage, LADDER, max_steps=2)
    assert sibling.direction is None and sibling.levels == [] and sibling.target == failure
    assert steer("in_band", None, lineage, LADDER, max_steps=2).reason == "no_failure"
    bottom = lineage.model_copy(update={"knobs": {"level": "evidence_hinted"}})
    assert steer("too_hard", failure, bottom, LADDER, max_steps=2).direction is None
    assert steer("too_hard", None, bottom, LADDER, max_steps=2).reason == "no_easier_level"
    assert failure_kind("token F1 0.33 < 0.6") == "token f1 # < #"
    assert failure_kind("numeric mismatch: 12 is not 13") == "numeric mismatch"
