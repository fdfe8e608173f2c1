"""Grade the answer file an agent left as taskfoundry's `exact_or_f1` verifier grades an answer:
`runtime/answer_match.py`'s match (numbers by value, else normalised exact match or token F1 at
the spec's threshold; an answer naming rivals beside the gold, or padded with the question,
scores 0) of the file's text against the gold answer, which only this verifier holds
(`task.json`); a verifier with rubric items takes exact matches only. A missing file, or a
symlink, is an empty answer.

Usage, from the folder holding `task.json` (Harbor's `/tests`):
    python3 -m foundry_verifier.answer ANSWER_FILE LOGS
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from .reward import write_outcome
from .runtime.answer_match import match

TASK = Path(__file__).resolve().parent.parent / "task.json"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="foundry_verifier.answer", description=__doc__)
    parser.add_argument("answer", type=Path, help="the agent's answer file")
    parser.add_argument("logs", type=Path, help="where the reward is written")
    args = parser.parse_args(argv)
    task = json.loads(TASK.read_text())
    given = args.answer
    reply = given.read_text(errors="replace") if given.is_file() and not given.is_symlink() else ""
    reward, why, exact = match(
        reply, task["answer"], task["f1_threshold"], task["context"], task["question"]
    )
    if reward == 1.0 and task["exact_only"] and not exact:
        reward, why = 0.0, "matched by token F1; this verifier's rubric items take exact matches"
    write_outcome(args.logs, reward, why)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
