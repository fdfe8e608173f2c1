"""Publishing an exported taskset version to the Hugging Face Hub.

Deliberately thin, since it needs a token and the network, neither of which the test suite has:
the version's parquet parts go up as a `datasets` dataset (one commit named after the version),
then its dataset card and manifest beside them. Only the missing-token path is tested.
"""

from __future__ import annotations

import json
from pathlib import Path

from data.runtime.errors import ReasonedError


def push_version(version: Path, repo: str, token: str | None = None) -> str:
    """Push taskset `version` to dataset repository `repo` (returned).
    The token is `token`, else `HF_TOKEN` or the one `hf auth login` saved."""
    from datasets import load_dataset
    from huggingface_hub import HfApi, get_token

    token = token or get_token()
    if not token:
        raise ReasonedError(
            "no_hub_token", "pushing to the Hub needs a token: set HF_TOKEN or run `hf auth login`"
        )
    manifest = json.loads((version / "manifest.json").read_text())
    label = f"{manifest['name']} {manifest['version']} ({manifest['fingerprint']})"
    parts = [str(version / part) for part in manifest["files"]]
    dataset = load_dataset("parquet", data_files=parts, split="train")
    dataset.push_to_hub(repo, token=token, commit_message=f"taskset {label}")
    api = HfApi(token=token)
    for name in ("README.md", "manifest.json"):
        api.upload_file(
            path_or_fileobj=str(version / name),
            path_in_repo=name,
            repo_id=repo,
            repo_type="dataset",
            commit_message=f"{name} of taskset {label}",
        )
    return repo
