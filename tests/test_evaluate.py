"""`foundry evaluate`: policies' pass rates on a held-out split, each task in its environment,
stored in the lake, shown by stats and the report, and compared task by task."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data.export import last_user_message, read_tasks
from data.lake import Lake
from data.llm import EMBEDDED, parse_policy, served_folder, weights_hash
from data.runtime.answer_match import token_f1
from flows.cli import main
from flows.evaluate import ARTIFACT_KEY, evaluate_flow
from generators.doc_qa_variants import HINT_MARK
from judges.evaluation import paired_difference
from tests.conftest import latest_artifacts
from tests.fakes.known_rate_policies import QUARTERS, KnownRatePolicies, lookalike
from tests.fakes.openai_server import FakeOpenAIServer, Responder
from tests.fakes.oracle import Oracle

WEAK = "weak-model"


class _WeakSolver:
    """The oracle that wrote `tasks` (it remembers their answers), except that the model
    `weak-model` never knows an answer."""

    def __init__(self, tasks: list[dict]) -> None:
        self.oracle = Oracle()
        self.oracle.answers = {last_user_message(t["prompt"]): t["answer"] for t in tasks}
        self.weak_requests = 0

    def __call__(self, body):
        if body.get("model") == WEAK:
            self.weak_requests += 1
            return "I do not know."
        return self.oracle(body)


def _copied_taskset(docqa_taskset, tmp_path) -> tuple[Path, Path, str, list[dict]]:
    """A copy of the doc-QA taskset's home and version, the split with most tasks, and the
    version's rows."""
    ctx, version, _ = docqa_taskset
    home = tmp_path / "home"
    shutil.copytree(ctx.config.home, home, symlinks=True)
    copy = tmp_path / "tasksets" / version.parent.name / version.name
    shutil.copytree(version, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    split = max(manifest["split"]["tasks"], key=manifest["split"]["tasks"].get)
    rows = [r for part in manifest["files"] for r in pq.read_table(copy / part).to_pylist()]
    return home, copy, split, rows


@contextmanager
def _served(responder: Responder, monkeypatch) -> Iterator[FakeOpenAIServer]:
    """`responder` behind a fake server, which is the configured endpoint as `fake-model`."""
    with FakeOpenAIServer(responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("FOUNDRY_MODEL", "fake-model")
        yield server


@pytest.fixture
def evaluated_home(docqa_taskset, tmp_path, monkeypatch):
    """A copy of the doc-QA taskset's home and version, the split with most tasks, and a fake
    server whose `fake-model` is the oracle and `weak-model` never right."""
    home, copy, split, rows = _copied_taskset(docqa_taskset, tmp_path)
    responder = _WeakSolver(rows)
    with _served(responder, monkeypatch) as server:
        yield home, copy, split, server, responder


def test_before_after_table_is_measured_stored_and_resumed(evaluated_home, capsys):
    home, version, split, server, responder = evaluated_home
    url = server.base_url
    split_ids = {r["task_id"] for r in read_tasks(version).to_pylist() if r["split"] == split}
    command = ["evaluate", str(version), "--home", str(home), "--split", split]
    command += ["--policy", f"fake-model@{url}", "--policy", f"{WEAK}@{url}", "--attempts", "2"]

    assert main(command) == 0

    out = capsys.readouterr().out
    assert f"split {split}: {len(split_ids)} tasks" in out
    assert "fake-model" in out and WEAK in out and "baseline" in out
    lake = Lake(home)
    rows = {r["policy"]: r for r in lake.rows("SELECT * FROM evaluations")}
    assert set(rows) == {"fake-model", WEAK}
    for row in rows.values():
        assert row["tasks"] == len(split_ids) and row["missing"] == 0
        assert row["attempts"] == 2 * len(split_ids) and row["k"] == 2
        assert row["ci_low"] <= row["pass_rate"] <= row["ci_high"]
    assert rows[WEAK]["passes"] == 0 and rows["fake-model"]["passes"] > 0
    stage = rows[WEAK]["stage"]
    assert stage == f"evaluate:k2:{WEAK}"
    measured = lake.rows("SELECT task_id, n FROM difficulty WHERE stage = ?", [stage])
    assert {r["task_id"] for r in measured} == split_ids and {r["n"] for r in measured} == {2}
    attempts = lake.rows("SELECT DISTINCT stage FROM attempts WHERE solver_model = ?", [WEAK])
    assert [a["stage"] for a in attempts] == [stage]
    [artifact] = latest_artifacts([ARTIFACT_KEY]).values()
    assert WEAK in artifact.data and "baseline" in artifact.data
    asked = responder.weak_requests
    assert asked >= 2 * len(split_ids)  # and the probes of the server, and the search turns

    assert main(command) == 0  # everything is measured: nothing is asked again
    assert responder.weak_requests == asked
    capsys.readouterr()

    assert main(["stats", "--home", str(home), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert {e["policy"] for e in stats["evaluations"]} == {"fake-model", WEAK}
    assert main(["stats", "--home", str(home)]) == 0
    assert "held-out evaluations" in capsys.readouterr().out
    page = home / "report.html"
    assert main(["report", "--home", str(home), "--taskset", str(version), "--out", str(page)]) == 0
    html = page.read_text()
    assert 'id="evaluation"' in html and WEAK in html


def test_an_unknown_split_or_unsplit_taskset_is_refused_clearly(docqa_taskset, tmp_path, capsys):
    _, version, _ = docqa_taskset
    old = tmp_path / "old"
    shutil.copytree(version, old)
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["split"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    home = str(tmp_path / "home")

    assert main(["evaluate", str(old), "--home", home, "--policy", "embedded"]) != 0
    assert "export it again" in capsys.readouterr().err


@pytest.fixture
def known_rates_home(docqa_taskset, tmp_path, monkeypatch):
    """A copy of the doc-QA taskset, the split with most tasks, the true pass rates of four
    policies on its questions, and a fake server where they answer at those rates (the oracle
    stands for every other model): `before` at rates 0, 1/4, ..., 1 in turn; `shuffled` with
    the same rates moved one question on (the same mean, other tasks); `worse` a quarter lower
    where it can be; `lookalike` never right, its answers shaped like the gold."""
    home, version, split, rows = _copied_taskset(docqa_taskset, tmp_path)
    questions = sorted(last_user_message(r["prompt"]) for r in rows if r["split"] == split)
    before = {q: QUARTERS[i % len(QUARTERS)] for i, q in enumerate(questions)}
    rates = {
        "before": before,
        "shuffled": {q: before[questions[i - 1]] for i, q in enumerate(questions)},
        "worse": {q: max(0.0, rate - 0.25) for q, rate in before.items()},
        "lookalike": dict.fromkeys(questions, 0.0),
    }
    answers = {last_user_message(r["prompt"]).split(HINT_MARK)[0]: r["answer"] for r in rows}
    policies = KnownRatePolicies(
        {p: table.__getitem__ for p, table in rates.items()}, answers, Oracle()
    )
    with _served(policies, monkeypatch) as server:
        yield home, version, split, rates, server.base_url


def test_evaluate_measures_true_pass_rates_and_no_gain_that_is_not_there(known_rates_home):
    """Pass rates and differences as the policies' true rates make them: no improvement where
    the mean is unchanged, the regression where it fell, and no pass for an answer that only
    looks like the gold."""
    home, version, split, rates, url = known_rates_home
    questions = sorted(rates["before"])
    assert len(questions) >= len(QUARTERS)  # every rate occurs
    golds = [r["answer"] for r in read_tasks(version).to_pylist()]
    assert all(token_f1(lookalike(gold), gold) >= 0.6 for gold in golds)  # F1 alone pays them

    result = evaluate_flow(
        taskset=str(version),
        policies=[f"{policy}@{url}" for policy in rates],
        split=split,
        attempts=4,
        home=str(home),
    )

    measured = {e["policy"]: e for e in result["evaluations"]}
    for policy, true_rates in rates.items():
        evaluation = measured[policy]
        assert evaluation["tasks"] == len(questions)
        assert evaluation["attempts"] == 4 * len(questions)
        assert evaluation["passes"] == 4 * sum(true_rates.values())  # 4 attempts: exact
        assert evaluation["ci_low"] <= evaluation["pass_rate"] <= evaluation["ci_high"]
    assert measured["lookalike"]["passes"] == 0

    shuffled, worse, lookalikes = result["differences"]
    ups = sum(rates["shuffled"][q] > rates["before"][q] for q in questions)
    downs = sum(rates["shuffled"][q] < rates["before"][q] for q in questions)
    assert shuffled["mean"] == pytest.approx(0.0) and shuffled["low"] < 0 < shuffled["high"]
    assert (shuffled["improved"], shuffled["worsened"]) == (ups, downs)
    true_drop = sum(rates["worse"].values()) / len(questions) - measured["before"]["pass_rate"]
    assert true_drop < 0 and worse["mean"] == pytest.approx(true_drop)
    assert worse["high"] <= 0 and worse["improved"] == 0
    assert lookalikes["mean"] == pytest.approx(-measured["before"]["pass_rate"])
    assert lookalikes["improved"] == 0


def test_paired_difference_resamples_tasks():
    before = [{"task_id": f"t{i}", "n": 4, "passes": 1} for i in range(20)]
    after = [{"task_id": f"t{i}", "n": 4, "passes": 3 if i < 15 else 1} for i in range(20)]

    difference = paired_difference(before, after, confidence=0.9)

    assert difference.tasks == 20 and difference.improved == 15 and difference.worsened == 0
    assert difference.mean == pytest.approx(0.375)
    assert 0 < difference.low < difference.mean < difference.high <= 0.5
    assert paired_difference(before, [], 0.9) is None


def test_policies_are_named_by_what_they_are(tmp_path):
    folder = tmp_path / "trained"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights one")
    first = parse_policy(str(folder))
    (folder / "model.safetensors").write_bytes(b"weights two")
    second = parse_policy(str(folder))

    assert first.folder == folder.resolve() and first.label.startswith("trained-")
    assert first.label != second.label  # trained again: another policy
    assert second.label.endswith(weights_hash(folder)[:12])
    assert parse_policy(EMBEDDED).model is None
    remote = parse_policy("org/model-7b@http://gpu:8000/v1")
    assert (remote.model, remote.base_url, remote.label) == (
        "org/model-7b",
        "http://gpu:8000/v1",
        "org-model-7b",
    )
    with pytest.raises(ValueError, match="URL"):
        parse_policy("model@gpu-box")
    (tmp_path / "notes").mkdir()
    with pytest.raises(ValueError, match="config.json"):
        parse_policy(str(tmp_path / "notes"))


@pytest.mark.full
def test_a_model_folder_is_served_for_its_evaluation(evaluated_home, capsys):
    """The embedded model's weights as a float model folder (what `foundry train` starts
    from), served by `transformers serve` for the evaluation of two tasks: structure, not
    content."""
    from data.llm import policy_path

    home, version, split, _, _ = evaluated_home
    folder = policy_path(EMBEDDED, home / "cache" / "policy")
    policy = parse_policy(folder)
    command = ["evaluate", str(version), "--home", str(home), "--split", split, "--json"]

    assert main([*command, "--policy", folder, "--attempts", "2", "--limit", "2"]) == 0

    result = json.loads(capsys.readouterr().out)
    [evaluation] = result["evaluations"]
    assert evaluation["policy"] == policy.label and evaluation["policy_spec"] == folder
    assert evaluation["tasks"] == result["tasks"] == 2 and evaluation["attempts"] == 4
    served = home / "cache" / "served" / policy.label
    assert (served / "model.safetensors").resolve() == policy.folder / "model.safetensors"
    assert json.loads((served / "generation_config.json").read_text())["do_sample"] is True
    solvers = Lake(home).rows(
        "SELECT DISTINCT solver_model FROM attempts WHERE stage = ?", [evaluation["stage"]]
    )
    assert solvers == [{"solver_model": str(served)}]  # the name carries the weights' hash
    assert (home / "logs" / f"policy-{policy.label}.log").is_file()


def test_a_served_folder_links_the_weights_and_samples(tmp_path):
    folder = tmp_path / "trained"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": 2}))

    served = served_folder(folder, tmp_path / "served" / "trained-abc")

    assert (served / "model.safetensors").is_symlink()
    assert (served / "model.safetensors").read_bytes() == b"weights"
    config = json.loads((served / "generation_config.json").read_text())
    assert config == {"eos_token_id": 2, "do_sample": True}  # the model's own, sampling
    assert json.loads((folder / "generation_config.json").read_text()) == {"eos_token_id": 2}
    assert served_folder(folder, served) == served  # made once
