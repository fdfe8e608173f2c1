"""A single-reply answer task (the verifiers package's `answer` grader: `exact_or_f1`, and
`llm_equivalence` by its exact/F1 path alone) as a Harbor task directory: the prompt (with the
passages an open-book task shows) as the instruction, the agent's answer written to
`/app/answer.txt`, and the gold, the spec's threshold and the question only in the verifier's
container (`tests/task.json`), graded by taskfoundry's matcher
(`data/export/harbor_verifier/answer.py`). `solution/` writes the gold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from data.export.harbor_tasks import layout
from data.export.splits import Row

ANSWER_FILE = f"{layout.APP}/answer.txt"
TIMEOUTS = layout.Timeouts(verifier=120.0, agent=600.0, build=600.0)


def write_answer_task(folder: Path, task: Row, manifest: dict[str, Any]) -> None:
    """Write `task` as a Harbor task in `folder`."""
    spec = json.loads(task["verifier"])
    prompt = "\n\n".join(m["content"].strip() for m in task["prompt"] if m["content"].strip())
    layout.write(folder / "instruction.md", layout.render("answer_instruction.md", prompt=prompt))
    layout.write(
        folder / "environment" / "Dockerfile", layout.template("answer_environment.Dockerfile")
    )

    tests = folder / "tests"
    layout.write_verifier(
        tests,
        {
            "answer": task["answer"],
            "f1_threshold": spec.get("f1_threshold", 0.6),
            "context": spec.get("context") or [],
            "question": layout.user_text(task["prompt"]),
            # a verifier with rubric items takes exact matches only, as the package's does
            "exact_only": bool(spec.get("rubric")),
        },
    )
    layout.write(tests / "Dockerfile", layout.template("answer_tests.Dockerfile"))
    layout.write(tests / "test.sh", layout.template("answer_test.sh"), executable=True)

    layout.write(folder / "solution" / "answer.txt", task["answer"] + "\n")
    layout.write(
        folder / "solution" / "solve.sh", layout.template("answer_solve.sh"), executable=True
    )
    text = layout.task_toml(
        task,
        manifest,
        TIMEOUTS,
        artifacts=[ANSWER_FILE],
    )
    layout.write(folder / "task.toml", text)
