"""Harbor task directories of the version (`data/export/harbor_tasks/`): `harbor/train/<task>/` and,
apart so that nobody trains on them by accident, `harbor/eval/<task>/`. The tasks the verifiers
package grades with its code or answer grader (code tasks; single-reply answer tasks) are
exported, each graded in a verifier container of its own by taskfoundry's grader; every other
task is left out and counted by reason (in the folder's README)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from data.export.environments import environment_of
from data.export.harbor_tasks import layout
from data.export.harbor_tasks.answer_tasks import write_answer_task
from data.export.harbor_tasks.code_tasks import write_code_task
from data.export.harbor_tasks.trees import TreeError
from data.export.projections.base import Inputs, Projector, Row
from data.export.verifiers_package import Graders, bundle_of, verifier_of

# the verifiers package's graders (`judges.verifier_types`' `Packaged`) a Harbor verifier runs:
# a task whose verifier type the package grades otherwise is left out as `verifier_<type>`
HARBOR_GRADERS = ("answer", "code")
REASONS = {
    "empty_answer": "has no gold answer to match",
    "code_without_workspace": "its repository tree is not in the version (no mirror at export)",
    "code_patch_does_not_apply": "its start, reference or test patches do not apply to its tree,"
    " or its reference has no edits",
}


def left_out(task: Row, version: Path, graders: Graders) -> str | None:
    """Why `task` of `version` has no Harbor task directory, or None: its verifier type has no
    grader here (`verifier_<type>`), it lacks what that grader needs, or it was calibrated with
    tools this export does not serve (`tools_<environment>`)."""
    kind = verifier_of(task)
    found = graders.get(kind)
    if found is None or found.grader not in HARBOR_GRADERS:
        return f"verifier_{kind}"
    environment = environment_of(task)
    if environment.with_tools:
        return f"tools_{environment.name}"
    return found.lacks(task, version)


def why_left_out(reason: str, graders: Graders) -> str:
    """What a reason for leaving a task out means, for the folder's README."""
    if reason.startswith("tools_"):
        return f"calibrated with the `{reason.removeprefix('tools_')}` tools, not served here"
    kind = reason.removeprefix("verifier_")
    if kind in graders:
        found = graders[kind]
        if found.grader is None:
            return found.why_not or "no grader without a model"
        return (
            f"the package grades it with its `{found.grader}` grader, which would need a tool"
            " server beside the agent's container; not made"
        )
    return REASONS.get(reason, reason)


def write_harbor(
    out: Path, version: Path, tasks: list[Row], graders: Graders
) -> tuple[int, dict[str, int]]:
    """One task directory per exportable task of `version` under `out`, each verifier type
    graded as the verifiers package grades it (`graders`); returns (tasks written, tasks left
    out per reason)."""
    manifest = json.loads((version / "manifest.json").read_text())
    skipped: Counter[str] = Counter()
    sides: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="foundry-harbor-") as scratch:
        for index, task in enumerate(tasks):
            reason = left_out(task, version, graders)
            folder = layout.task_folder(out, task)
            if reason is None:
                grader = graders[verifier_of(task)].grader
                reason = _written(
                    grader, folder, task, manifest, version, Path(scratch) / str(index)
                )
            if reason:
                skipped[reason] += 1
            else:
                sides[folder.parent.name] += 1
    text = layout.render(
        "harbor_readme.md",
        name=manifest["name"],
        version=manifest["version"],
        train=str(sides["train"]),
        eval=str(sides["eval"]),
        left_out="".join(
            f"| {r} | {n} | {why_left_out(r, graders)} |\n" for r, n in sorted(skipped.items())
        ),
    )
    layout.write(out / "README.md", text)
    return sum(sides.values()), dict(sorted(skipped.items()))


def _written(
    grader: str, folder: Path, task: Row, manifest: dict, version: Path, scratch: Path
) -> str | None:
    """Write one task (not left out) with the writer of its package grader; the reason it
    could not be, or None."""
    if grader == "answer":
        write_answer_task(folder, task, manifest)
        return None
    scratch.mkdir()
    try:
        write_code_task(folder, task, manifest, bundle_of(version, task), scratch)
    except TreeError:
        shutil.rmtree(folder, ignore_errors=True)
        return "code_patch_does_not_apply"
    return None


def _write(out: Path, version: Path, tasks: list[Row], inputs: Inputs) -> tuple[int, dict]:
    return write_harbor(out, version, tasks, inputs.graders)


PROJECTION = Projector("harbor", "Harbor task directories, eval tasks apart", _write)
