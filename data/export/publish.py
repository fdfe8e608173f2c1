"""Publishing a taskset version whole: its split files, trainer projections, corpus, workspaces,
card and manifest, to the Hugging Face Hub (`hf://datasets/OWNER/NAME`) or any fsspec
destination (a folder, `s3://bucket/path`, `memory://...`).

- **The Hub**: the version becomes the dataset repository's content in one commit (files the
  previous version had and this one has not are deleted in it), tagged with the version's
  name, so the Hub reads its card's front matter and shows its `train` and `eval` splits, and
  `load_dataset(repo, revision="v0003")` gives any published version back.
- **A filesystem**: the version's files go to `<destination>/<vNNNN>/`, its manifest last (a
  version with a manifest there is whole), then `<destination>/latest.json` names it unless a
  newer version is there already.

A version already at the destination with the same fingerprint is not sent again; a version
waiting for approval is not published.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import fsspec

from data.export.versions import AWAITING_APPROVAL, awaits_approval, version_number
from data.runtime.errors import ReasonedError

HUB_PREFIX = "hf://datasets/"
LATEST = "latest.json"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Published:
    destination: str
    version: str
    files: int  # files sent (0 where the destination already held this version)
    written: bool


def publish_version(version: Path, destination: str, token: str | None = None) -> Published:
    """Publish the taskset `version` folder to `destination` (above); `token` for the Hub,
    else `HF_TOKEN` or the one `hf auth login` saved."""
    if awaits_approval(version):
        raise ReasonedError(
            "awaiting_approval", f"{version} waits for approval: approve it before publishing"
        )
    if destination.startswith(HUB_PREFIX):
        return _to_hub(version, destination.removeprefix(HUB_PREFIX).strip("/"), token)
    return _to_filesystem(version, destination)


def version_files(version: Path) -> list[Path]:
    """Every file of a version, relative to it: none hidden (a projection being written) and
    not the approval marker."""
    return sorted(
        path.relative_to(version)
        for path in version.rglob("*")
        if path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(version).parts)
        and path.name != AWAITING_APPROVAL
    )


def _fingerprint(version: Path) -> str:
    return json.loads((version / MANIFEST).read_text())["fingerprint"]


def _to_filesystem(version: Path, destination: str) -> Published:
    fs, root = fsspec.core.url_to_fs(destination)
    target = f"{root.rstrip('/')}/{version.name}"
    there = f"{target}/{MANIFEST}"
    fingerprint = _fingerprint(version)
    if fs.exists(there) and json.loads(fs.cat_file(there))["fingerprint"] == fingerprint:
        return Published(destination, version.name, 0, written=False)
    files = [f for f in version_files(version) if f.as_posix() != MANIFEST]
    for relative in files:
        remote = f"{target}/{relative.as_posix()}"
        fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
        fs.put_file(str(version / relative), remote)
    fs.put_file(str(version / MANIFEST), there)  # last: a version with its manifest is whole
    latest = f"{root.rstrip('/')}/{LATEST}"
    newest = json.loads(fs.cat_file(latest))["version"] if fs.exists(latest) else None
    if newest is None or version_number(Path(newest)) <= version_number(version):
        pointer = {"version": version.name, "fingerprint": fingerprint}
        fs.pipe_file(latest, (json.dumps(pointer) + "\n").encode())
    return Published(destination, version.name, len(files) + 1, written=True)


def _to_hub(version: Path, repo: str, token: str | None) -> Published:
    from huggingface_hub import HfApi, get_token

    token = token or get_token()
    if not token:
        raise ReasonedError(
            "no_hub_token", "publishing to the Hub needs a token: set HF_TOKEN or `hf auth login`"
        )
    api = HfApi(token=token)
    api.create_repo(repo, repo_type="dataset", exist_ok=True)
    tags = {ref.name for ref in api.list_repo_refs(repo, repo_type="dataset").tags}
    if version.name in tags:
        return Published(HUB_PREFIX + repo, version.name, 0, written=False)
    manifest = json.loads((version / MANIFEST).read_text())
    files = version_files(version)
    api.upload_folder(
        repo_id=repo,
        repo_type="dataset",
        folder_path=version,
        allow_patterns=[f.as_posix() for f in files],
        delete_patterns=["*"],  # what the previous version had and this one has not
        commit_message=f"taskset {manifest['name']} {version.name} ({manifest['fingerprint']})",
    )
    api.create_tag(repo, tag=version.name, repo_type="dataset")
    return Published(HUB_PREFIX + repo, version.name, len(files), written=True)
