"""One smoke test through Prefect for real (ephemeral API), plus the CLI around it."""

from __future__ import annotations

import json
import shutil

from data.export import read_tasks
from flows.artifacts import KEYS
from flows.cli import main
from tests.conftest import SAMPLE_DOCS, latest_artifacts


def test_pipeline_flow_and_cli(tmp_path, monkeypatch, oracle_server, capsys):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for doc in sorted(SAMPLE_DOCS.glob("*.md"))[:4]:
        shutil.copy(doc, corpus)
    home = tmp_path / "home"
    monkeypatch.setenv("OPENAI_BASE_URL", oracle_server.base_url)  # no FOUNDRY_MODEL: listed
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")

    assert main(["run", "--home", str(home), str(corpus)]) == 0
    out = capsys.readouterr().out
    assert "LLM calls this run:" in out and "taskset: " in out
    latest = home / "tasksets" / "docqa" / "latest"
    manifest = json.loads((latest / "manifest.json").read_text())
    assert manifest["n_tasks"] > 0 and manifest["models"]["generator"] == ["fake-model"]
    calls = len(oracle_server.requests)
    assert calls > 0
    artifacts = run_artifacts()
    assert set(artifacts) == set(KEYS)
    stages = {row["stage"]: row for row in json.loads(artifacts["foundry-funnel"].data)}
    assert stages["generate"]["items"] > 0 and "done" in stages["verify"]
    assert "pass rate per task" in artifacts["foundry-difficulty"].data
    assert {r["role"] for r in json.loads(artifacts["foundry-llm"].data)} >= {"generator", "solver"}
    assert str(latest.resolve()) in artifacts["foundry-taskset"].data
    assert "is the first version" in artifacts["foundry-diff"].data

    assert main(["run", "--home", str(home)]) == 0  # sources exist: nothing to ingest, all done
    assert "0 live" in capsys.readouterr().out
    assert len(oracle_server.requests) == calls

    out_dir = tmp_path / "in-band"
    assert main(["export", "--home", str(home), "--out", str(out_dir), "--band", "0.2", "0.8"]) == 0
    banded = json.loads((out_dir / "docqa" / "latest" / "manifest.json").read_text())
    assert banded["band_filter"] == [0.2, 0.8]
    assert banded["by_band"]["too_hard"] == banded["by_band"]["too_easy"] == 0
    rates = read_tasks(out_dir / "docqa" / "latest")["pass_rate"]
    assert all(0.2 <= p <= 0.8 for p in rates.to_pylist())
    capsys.readouterr()

    # re-calibrate against another model on the same server: both measurements are kept
    recalibrate = ["calibrate", "--home", str(home), "--solver", "other-model"]
    assert main([*recalibrate, "--solver-url", oracle_server.base_url]) == 0
    assert main(["export", "--home", str(home), "--solver", "other-model"]) == 0
    other = home / "tasksets" / "docqa-other-model" / "latest"
    solvers = read_tasks(other)["solver_model"].to_pylist()
    assert set(solvers) == {"other-model"} and len(solvers) == manifest["n_tasks"]
    assert main(["export", "--home", str(home)]) == 0  # the pipeline's own taskset is unchanged
    assert "unchanged" in capsys.readouterr().out
    capsys.readouterr()

    assert main(["stats", "--home", str(home), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["recalibrated_bands"]["calibrate:other-model"]
    assert {a["solver"] for a in stats["attempts"]} == {"fake-model", "other-model"}
    assert stats["runs"] == 6
    assert stats["stages"]["ingest"]["done"] == 4
    made = stats["repair"]["variants"]  # out-of-band tasks moved one level toward the band
    assert (
        made > 0
        and stats["stages"]["verify"]["items"] == stats["stages"]["candidate"]["done"] + made
    )
    assert stats["llm"]["generator"]["calls"] > 0
    assert stats["judges"]["judges"]["judge:0"]["agreement_with_consensus"] == 1.0
    assert stats["review"]["reviewed"] == stats["stages"]["review"]["done"] > 0
    assert stats["review"]["rubric_items"] > 0 and stats["review"]["hackable"] == 0
    attempts = next(a for a in stats["attempts"] if a["stage"] == "calibrate")
    assert (attempts["method"], attempts["prior"]) == ("adaptive", "jeffreys")
    assert 2 <= attempts["min"] <= attempts["mean"] <= attempts["max"] <= 32

    assert main(["stats", "--home", str(home)]) == 0
    text = capsys.readouterr().out
    assert "verify" in text and "hackable tasks: 0" in text and "attempts per task" in text
    assert "repaired tasks: " in text


def test_band_must_be_ordered(capsys):
    assert main(["export", "--band", "0.9", "0.1"]) == 2
    assert "--band" in capsys.readouterr().err


def run_artifacts() -> dict:
    """The latest artifact of each of the pipeline's keys, read back through the Prefect API."""
    return latest_artifacts(list(KEYS))
