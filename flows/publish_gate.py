"""The publish gate of a scheduled run: a new taskset version waits for a person's approval in
the Prefect UI before it becomes `latest`.

With `[serve] publish_gate = true` (or the flow's `publish_gate` parameter), the pipeline flow
exports its new version unpublished, leaves its summary and its diff against the version
before it as the `foundry-publish` artifact, and pauses (Prefect's pause with a typed input:
the UI's Resume button shows the `PublishDecision` form). Approved, the version becomes
`latest`; rejected, it is set aside as `vNNNN.rejected` and the flow run ends Cancelled with
the reviewer's note. Unanswered within `[serve] publish_timeout_h`, the flow run fails and the
version stays unpublished.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect.artifacts import create_markdown_artifact
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from prefect.states import Cancelled, State

from data.export import approve_version, previous_version, reject_version
from data.review import diff_versions, format_diff

POLL_S = 5  # how often the paused flow asks whether it was resumed


class PublishDecision(RunInput):
    """Publish this taskset version?"""

    approve: bool
    note: str = ""


def gate(export: dict[str, Any], timeout_h: float) -> State | dict[str, Any]:
    """Ask for approval of the version `export` wrote (nothing to ask where it wrote none);
    what was decided, or the Cancelled state of a rejection."""
    version = Path(export["path"])
    if not export["written"]:
        return {"decision": "nothing new to publish", "version": str(version)}
    create_markdown_artifact(
        _summary(version),
        key="foundry-publish",
        description="A new taskset version waiting for approval",
    )
    decision = pause_flow_run(
        wait_for_input=PublishDecision, timeout=int(timeout_h * 3600), poll_interval=POLL_S
    )
    if decision.approve:
        approve_version(version)
        return {"decision": "approved", "version": str(version), "note": decision.note}
    aside = reject_version(version)
    return Cancelled(
        message=f"publishing {version.name} rejected: {decision.note or 'no note'}"
        f" (set aside as {aside.name})"
    )


def _summary(version: Path) -> str:
    manifest = json.loads((version / "manifest.json").read_text())
    bands = ", ".join(f"{band} {n}" for band, n in manifest["by_band"].items())
    before = previous_version(version)
    changes = format_diff(diff_versions(before, version)) if before else "the first version"
    return (
        f"### {manifest['name']} {manifest['version']} waits for approval\n\n"
        f"{manifest['n_tasks']} tasks ({bands}); kinds: "
        + ", ".join(f"{k} {n}" for k, n in manifest["by_kind"].items())
        + f"\n\nResume this flow run to decide: approve to make it `latest`, or not (with a"
        f" note) to set it aside.\n\n```\n{changes}\n```\n"
    )
