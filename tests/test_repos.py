"""Repository ingestion: the bundled sample repository, commit records, and bad origins."""

from __future__ import annotations

import json

import pytest

from data.lake import Lake, format_funnel, funnel
from data.repos import GitError, build_sample_repo, git, ingest_repo
from data.runtime.languages import Python, detect_language
from flows.cli import main

SAMPLE_HEAD = "b430c1c49582a914cb1ede10e24efdf7fa6c521b"
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
}


@pytest.fixture
def sample(tmp_path):
    return build_sample_repo(tmp_path / "ledgerline")


def repo_with(path, files):
    path.mkdir()
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "init", "--quiet")
    git(path, "add", ".")
    git(path, "commit", "--quiet", "--message", "first", env=IDENTITY)
    return path


def test_the_sample_repository_is_the_same_everywhere(tmp_path, sample):
    assert git(sample, "rev-parse", "HEAD").strip() == SAMPLE_HEAD
    again = build_sample_repo(tmp_path / "again")
    assert git(again, "rev-parse", "HEAD").strip() == SAMPLE_HEAD
    assert len(git(sample, "rev-list", "HEAD").split()) == 8


def test_python_test_files_as_pytest_finds_them():
    python = Python()
    for path in ("tests/test_parse.py", "pkg/tests/helpers.py", "test_x.py", "a/b_test.py"):
        assert python.is_test_file(path), path
    assert python.is_test_file("tests/fixtures/ledger.txt")  # data travels with its tests
    for path in ("src/pkg/testing.py", "README.md", "src/contest.py", "test_notes.txt"):
        assert not python.is_test_file(path), path
    assert python.is_source_file("src/pkg/core.py") and not python.is_source_file("README.md")
    assert detect_language(["README.md", "pyproject.toml"]) is not None
    assert detect_language(["README.md", "main.go"]) is None


def test_ingest_records_every_commit_once(tmp_path, sample):
    home = tmp_path / "home"
    lake = Lake(home)
    counts = ingest_repo(str(sample), lake, home, "run-1")
    assert counts["done:ingested"] == 1
    assert counts["commit:source_and_tests"] == 7 and counts["commit:other"] == 1

    (repo,) = lake.rows("SELECT * FROM repos")
    assert (repo["head"], repo["language"], repo["n_commits"]) == (SAMPLE_HEAD, "python", 8)
    commits = lake.rows("SELECT * FROM commits ORDER BY authored_at")
    assert commits[0]["parent"] == "" and commits[1]["parent"] == commits[0]["sha"]
    fix = next(c for c in commits if c["message"].startswith("Count refunds"))
    files = {f["path"]: f for f in json.loads(fix["files"])}
    assert (
        files["tests/test_summary.py"]["is_test"]
        and not files["src/ledgerline/summary.py"]["is_test"]
    )
    assert "+def test_refunds_reduce_their_category" in fix["diff"] and not fix["diff_truncated"]
    assert "Mara Ellison" in fix["author"] and fix["authored_at"].startswith("2024-03-18")

    again = ingest_repo(str(sample), lake, home, "run-2")  # nothing new: nothing written twice
    assert again == {"done:ingested": 1}
    assert len(lake.rows("SELECT sha FROM commits")) == 8

    git(sample, "commit", "--quiet", "--allow-empty", "--message", "later", env=IDENTITY)
    ingest_repo(str(sample), lake, home, "run-3")  # the mirror fetches the new commit
    assert len(lake.rows("SELECT sha FROM commits")) == 9

    summary = funnel(lake)
    assert summary["repos"] == {
        "repos": 1,
        "commits": {"other": 2, "source_and_tests": 7},
        "replayed": 0,
        "code_tasks": [],
    }
    assert "repositories: 1" in format_funnel(summary)


def test_a_revision_range_limits_the_commits(tmp_path, sample):
    home = tmp_path / "home"
    lake = Lake(home)
    ingest_repo(str(sample), lake, home, "run-1", rev="HEAD~3..HEAD")
    assert len(lake.rows("SELECT sha FROM commits")) == 3


def test_bad_origins_are_recorded_with_their_reason(tmp_path):
    home = tmp_path / "home"
    lake = Lake(home)
    no_tests = repo_with(tmp_path / "no-tests", {"pyproject.toml": "", "pkg/core.py": "x = 1\n"})
    other = repo_with(tmp_path / "go", {"main.go": "package main\n", "main_test.go": ""})
    not_git = tmp_path / "plain"
    not_git.mkdir()
    assert ingest_repo(str(tmp_path / "missing"), lake, home, "r") == {"rejected:unreadable": 1}
    assert ingest_repo(str(not_git), lake, home, "r") == {"rejected:unreadable": 1}
    assert ingest_repo(str(no_tests), lake, home, "r") == {"rejected:no_tests": 1}
    assert ingest_repo(str(other), lake, home, "r") == {"rejected:unsupported_language": 1}
    reasons = lake.rows("SELECT reason, detail FROM status WHERE stage = 'ingest_repo'")
    assert all(r["detail"] for r in reasons)
    assert not lake.rows("SELECT * FROM commits") and not lake.rows("SELECT * FROM repos")
    with pytest.raises(GitError, match="git rev-parse"):
        git(not_git, "rev-parse", "HEAD")


def test_ingest_repo_and_replay_commands(tmp_path, sample, capsys):
    home = tmp_path / "home"
    assert main(["ingest", "repo", str(sample), "--home", str(home), "--rev", "HEAD~2..HEAD"]) == 0
    assert json.loads(capsys.readouterr().out)["done:ingested"] == 1
    assert len(Lake(home).rows("SELECT sha FROM commits")) == 2
    assert main(["replay", "--home", str(home)]) == 0  # the report sort fix and a docs commit
    counts = json.loads(capsys.readouterr().out)
    assert counts == {
        "repo_tests:done:tests_run": 1,
        "done:replayed": 1,
        "rejected:not_source_and_tests": 1,
    }


def test_a_relative_home_records_a_mirror_that_other_folders_can_read(
    sample, tmp_path, monkeypatch
):
    # `foundry redteam --home` and the trainer read the lake from wherever they are started
    monkeypatch.chdir(tmp_path)
    lake = Lake(tmp_path / "home")
    ingest_repo(str(sample), lake, tmp_path.joinpath("home").relative_to(tmp_path), "run-1")
    [repo] = lake.rows("SELECT mirror FROM repos")
    monkeypatch.chdir(sample)
    assert git(repo["mirror"], "rev-parse", "HEAD").strip() == SAMPLE_HEAD
