"""Publishing sends a version whole (split files, projections, card, manifest) to a folder, any
fsspec destination or the Hub, once; a version waiting for approval is not published."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import fsspec
import pytest

from data.export import AWAITING_APPROVAL, HUB_PREFIX, publish, publish_version, version_files
from data.runtime.errors import ReasonedError
from flows.cli import main


def test_a_folder_receives_the_whole_version_once(docqa_taskset, tmp_path):
    _, version, projections = docqa_taskset
    destination = tmp_path / "published"

    sent = publish_version(version, str(destination))

    files = version_files(version)
    assert sent.written and sent.files == len(files)
    names = {f.as_posix() for f in files}
    manifest = json.loads((version / "manifest.json").read_text())
    assert {"README.md", "manifest.json", *manifest["files"]} <= names
    assert {f"{fmt}/projection.json" for fmt in projections} <= names  # every projection
    for relative in files:
        assert (destination / version.name / relative).read_bytes() == (
            version / relative
        ).read_bytes()
    assert json.loads((destination / "latest.json").read_text())["version"] == version.name
    again = publish_version(version, str(destination))
    assert not again.written and again.files == 0


def test_an_interrupted_publication_is_sent_again_whole(docqa_taskset, tmp_path):
    _, version, _ = docqa_taskset
    destination = tmp_path / "published"
    publish_version(version, str(destination))
    (destination / version.name / "manifest.json").unlink()  # killed before the manifest went
    (destination / version.name / "README.md").write_text("torn")

    assert publish_version(version, str(destination)).written
    card = (destination / version.name / "README.md").read_text()
    assert card == (version / "README.md").read_text()


def test_an_older_version_does_not_take_latest_back(docqa_taskset, tmp_path):
    _, version, _ = docqa_taskset
    newer = shutil.copytree(version, tmp_path / "tasks" / "v0009")
    destination = f"memory://{tmp_path.name}/published"
    publish_version(newer, destination)
    publish_version(version, destination)
    fs = fsspec.filesystem("memory")
    latest = json.loads(fs.cat_file(f"/{tmp_path.name}/published/latest.json"))
    assert latest["version"] == "v0009"
    assert fs.exists(f"/{tmp_path.name}/published/{version.name}/manifest.json")


def test_a_version_waiting_for_approval_is_not_published(docqa_taskset, tmp_path):
    _, version, _ = docqa_taskset
    waiting = shutil.copytree(version, tmp_path / "v0002")
    (waiting / AWAITING_APPROVAL).write_text("")
    with pytest.raises(ReasonedError, match="waits for approval"):
        publish_version(waiting, str(tmp_path / "published"))
    assert not (tmp_path / "published").exists()


class FakeHub:
    """HfApi at the one seam publishing uses: the repositories, commits and tags it was given."""

    commits: list[dict] = []
    tags: dict[str, list[str]] = {}

    def __init__(self, token: str) -> None:
        assert token == "hf_test"

    def create_repo(self, repo: str, repo_type: str, exist_ok: bool) -> None:
        assert repo_type == "dataset" and exist_ok
        self.tags.setdefault(repo, [])

    def list_repo_refs(self, repo: str, repo_type: str):
        return SimpleNamespace(tags=[SimpleNamespace(name=tag) for tag in self.tags[repo]])

    def upload_folder(self, **commit) -> None:
        self.commits.append(commit)

    def create_tag(self, repo: str, tag: str, repo_type: str) -> None:
        self.tags[repo].append(tag)


def test_the_hub_gets_the_version_as_one_tagged_commit(docqa_taskset, monkeypatch):
    _, version, _ = docqa_taskset
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHub)
    FakeHub.commits, FakeHub.tags = [], {}

    sent = publish_version(version, f"{HUB_PREFIX}someone/tasks", token="hf_test")

    [commit] = FakeHub.commits
    assert commit["repo_id"] == "someone/tasks" and Path(commit["folder_path"]) == version
    assert commit["allow_patterns"] == [f.as_posix() for f in version_files(version)]
    assert commit["delete_patterns"] == ["*"]  # the previous version's files go
    assert FakeHub.tags["someone/tasks"] == [version.name]
    assert sent.written and sent.destination == "hf://datasets/someone/tasks"
    assert not publish_version(version, f"{HUB_PREFIX}someone/tasks", token="hf_test").written
    assert len(FakeHub.commits) == 1


def test_publishing_to_the_hub_without_a_token_says_so(docqa_taskset, monkeypatch, tmp_path):
    _, version, _ = docqa_taskset
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(ReasonedError, match="needs a token"):
        publish.publish_version(version, f"{HUB_PREFIX}someone/tasks")


def test_foundry_export_publishes_to_the_destination_it_is_given(docqa_taskset, tmp_path, capsys):
    ctx, version, _ = docqa_taskset
    destination = tmp_path / "published"
    home = str(ctx.config.home)
    assert main(["export", "--home", home, "--publish-to", str(destination)]) == 0
    assert f"published: {destination} {version.name} (" in capsys.readouterr().out
    assert (destination / version.name / "manifest.json").is_file()
