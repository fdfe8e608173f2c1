"""Commit replay on the bundled sample repository: F2P / P2P tests from real sandbox runs, the
gold self-check, and the commits that cannot be replayed."""

from __future__ import annotations

from pathlib import Path

import pytest

from data.lake import CommitReplay, Lake, format_funnel, funnel
from data.repos import build_sample_repo, git, ingest_repo
from data.runtime.python_env import requirements_of
from data.runtime.sandbox import Limits
from families.code_stages import pending_replays, replay_commits
from families.function_rebuild import rebuild_functions
from generators.commit_replay import Unusable, analyse
from tests.conftest import make_context
from tests.test_repos import IDENTITY

LIMITS = Limits(wall_s=120)


@pytest.fixture(scope="module")
def sample_lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("replay")
    repo = build_sample_repo(root / "ledgerline")
    (repo / "tests" / "test_wishful.py").write_text("def test_not_yet():\n    assert 1 == 2\n")
    (repo / "src" / "ledgerline" / "parse.py").write_text(
        (repo / "src" / "ledgerline" / "parse.py").read_text() + "\n# a test that fails\n"
    )
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "--message", "Add a test that cannot pass", env=IDENTITY)
    lake = Lake(root / "home")
    ingest_repo(str(repo), lake, root / "home", "run-1")
    mirror = Path(lake.rows("SELECT mirror FROM repos")[0]["mirror"])
    commits = {c.message.splitlines()[0]: c for c in lake.records("commits")}
    return mirror, commits


def replay(sample_lake, subject):
    mirror, commits = sample_lake
    return analyse(commits[subject], mirror, LIMITS)


def test_a_bug_fix_has_its_new_test_as_fail_to_pass(sample_lake):
    result = replay(sample_lake, "Count refunds in category totals")
    assert isinstance(result, CommitReplay)
    assert result.fail_to_pass == ["tests/test_summary.py::test_refunds_reduce_their_category"]
    assert len(result.pass_to_pass) == 14
    assert "tests/test_parse.py::test_thousands_separators" in result.pass_to_pass
    assert "src/ledgerline/summary.py" in result.reference_patch
    assert "tests/" not in result.reference_patch  # the tests are part of the start, not the fix
    assert "+def test_refunds_reduce_their_category" in result.test_patch


def test_a_feature_with_a_new_module_keeps_the_old_tests_as_pass_to_pass(sample_lake):
    result = replay(sample_lake, "Add currency conversion at given rates")
    assert isinstance(result, CommitReplay)
    assert {t.split("::")[0] for t in result.fail_to_pass} == {"tests/test_convert.py"}
    assert len(result.fail_to_pass) == 4 and len(result.pass_to_pass) == 15
    assert result.tests_before == 16  # 15 old tests plus the new module that cannot import


@pytest.mark.parametrize(
    ("subject", "reason"),
    [
        ("Parse ledger lines into entries", "root_commit"),
        ("Document totals and the monthly report", "not_source_and_tests"),
        ("Add a test that cannot pass", "no_fail_to_pass"),
    ],
)
def test_commits_that_cannot_be_replayed_say_why(sample_lake, subject, reason):
    result = replay(sample_lake, subject)
    assert isinstance(result, Unusable) and result.reason == reason


def test_requirements_come_from_pyproject_and_requirement_files(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["attrs>=22", "evil @ https://example.org/e.tgz"]\n'
        '[project.optional-dependencies]\ntest = ["hypothesis", 7]\ndocs = ["sphinx"]\n'
    )
    (tmp_path / "requirements-dev.txt").write_text(
        "# tools\nrequests==2.32.3  # pinned\n-e .\ngit+https://example.org/x.git\n-r other.txt\n"
    )
    assert requirements_of(tmp_path) == ["attrs>=22", "hypothesis", "requests==2.32.3", "pytest"]
    assert requirements_of(tmp_path / "missing") == ["pytest"]
    secret = tmp_path / "secret.txt"
    secret.write_text("sk-planted-key\n")
    (tmp_path / "requirements.txt").symlink_to(secret)  # never read: it could point anywhere
    assert "sk-planted-key" not in requirements_of(tmp_path)
    (tmp_path / "pyproject.toml").write_text('project = "not a table"\n')
    assert requirements_of(tmp_path) == ["requests==2.32.3", "pytest"]


def ingested(tmp_path, repo):
    """A stage context whose lake holds `repo`, ingested."""
    ctx = make_context(tmp_path / "home")
    ingest_repo(str(repo), ctx.lake, ctx.config.home, ctx.run_id)
    return ctx


def test_the_replay_stage_records_each_commit_once(tmp_path):
    ctx = ingested(tmp_path, build_sample_repo(tmp_path / "ledgerline"))
    counts = replay_commits(ctx)
    assert counts == {
        "repo_tests:done:tests_run": 1,
        "done:replayed": 6,
        "rejected:root_commit": 1,
        "rejected:not_source_and_tests": 1,
    }
    replays = ctx.lake.records("replays")
    assert len(replays) == 6 and all(r.fail_to_pass for r in replays)
    assert not pending_replays(ctx) and replay_commits(ctx) == {}  # nothing runs twice
    assert "replayed with fail-to-pass tests: 6" in format_funnel(funnel(ctx.lake))


def test_a_repository_whose_tests_do_not_run_is_not_replayed(tmp_path):
    repo = build_sample_repo(tmp_path / "ledgerline")
    (repo / "tests" / "conftest.py").write_text("raise RuntimeError('broken test setup')\n")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "--message", "Break the test setup", env=IDENTITY)
    ctx = ingested(tmp_path, repo)
    counts = replay_commits(ctx)
    assert counts == {
        "repo_tests:rejected:tests_do_not_run": 1,
        "rejected:repo_tests_do_not_run": 9,
    }
    (check,) = ctx.lake.rows("SELECT detail FROM status WHERE stage = 'repo_tests'")
    assert check["detail"].startswith("exit ")
    assert not ctx.lake.records("replays")
    assert rebuild_functions(ctx) == {"rebuild:rejected:tests_do_not_run": 1}
    assert not ctx.lake.records("tasks")
