"""Does a taskset teach? Held-out pass rate before and after training on it, and a control.

From the bundled corpus (`data/samples/docs`) on the embedded model, with the settings of
`bench/learning.toml` (document questions with their passage in the prompt, a third of the
documents held out), through the same commands a user runs:

1. `foundry run`: generate, verify, calibrate, repair and export the taskset; export also the
   in-band tasks (`--band 0.2 0.8`), which are what it trains on;
2. `foundry train` on the in-band tasks' `train` split: GRPO on the embedded SmolLM2-135M for
   `--steps` steps at `--learning-rate` (the eval split is never trained on);
3. the same with `--shuffle-rewards`: the control, whose rewards are permuted across each
   step's completions, so that it sees the same reward distribution with no signal in it;
4. `foundry evaluate` on the `eval` split of the whole taskset (every band: a regression on
   easy tasks counts too), `--attempts` per task: the policy before training (the embedded
   model's weights as a float model, served the same way as the trained ones), after, and
   the control.

It prints each phase's wall time, the tasks per split and band, the before/after/control table
(pass rate with its Wilson interval; each trained policy's per-task difference from before with
a bootstrap interval over tasks), the trained policy's difference from the control (what the
reward taught beyond training on the same prompts without it) and writes everything to
`HOME/learning.json`. Intervals are at the configured `calibrate.confidence` (90%). A re-run with
the same `--home` resumes (the run and the evaluations from the lake; training runs again).

`.venv/bin/python bench/learning.py [--home DIR] [--steps 40] [--learning-rate 2e-5]
[--attempts 4]`
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.lake import Lake  # noqa: E402
from data.llm import (  # noqa: E402
    EMBEDDED,
    parse_policy,  # noqa: E402
    policy_path,
)
from judges.evaluation import paired_difference, split_task_ids, task_results  # noqa: E402

FOUNDRY = Path(sys.executable).parent / "foundry"
CONFIG = ROOT / "bench" / "learning.toml"
CORPUS = ROOT / "data" / "samples" / "docs"
BAND = ("0.2", "0.8")


def foundry(*args: str, home: Path) -> str:
    """Run `foundry ARGS --home HOME --config CONFIG`; its stdout (stderr goes to the log)."""
    command = [str(FOUNDRY), *args, "--home", str(home), "--config", str(CONFIG)]
    with (home / "learning.log").open("a") as log:
        log.write(f"\n$ {' '.join(command)}\n")
        log.flush()
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}; see {log.name}")
    return done.stdout


def timed(name: str, timings: dict[str, float], action, *args, **kwargs):
    started = time.perf_counter()
    result = action(*args, **kwargs)
    timings[name] = round(time.perf_counter() - started, 1)
    print(f"{name}: {timings[name]:.0f} s", flush=True)
    return result


def splits(version: Path) -> dict[str, Any]:
    """A taskset version's tasks and groups per split, and tasks per band."""
    manifest = json.loads((version / "manifest.json").read_text())
    split = manifest["split"]
    return {
        "tasks": split["tasks"],
        "groups": split["groups"],
        "withheld": split["withheld"],
        "by_band": manifest["by_band"],
    }


def trained_against_control(
    home: Path, version: Path, evaluations: list[dict[str, Any]]
) -> dict[str, Any]:
    """The trained policy's per-task difference from the control's on the held-out tasks
    (`evaluations`: before, trained, control, as `foundry evaluate --json` lists them): what
    the reward taught beyond what training on the same prompts does without it."""
    _, trained, control = evaluations
    ids = split_task_ids(version, trained["split"])
    lake = Lake(home)
    versus = paired_difference(
        task_results(lake, control["stage"], ids),
        task_results(lake, trained["stage"], ids),
        trained["confidence"],
    )
    return asdict(versus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="(default: a new temporary folder)")
    parser.add_argument("--steps", type=int, default=40, help="GRPO steps per training run")
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument(
        "--completion-tokens", type=int, default=64, help="per completion (answers are short)"
    )
    parser.add_argument("--attempts", type=int, default=4, help="per task, when evaluating")
    args = parser.parse_args()
    home = (args.home or Path(tempfile.mkdtemp(prefix="foundry-learning-"))).resolve()
    home.mkdir(parents=True, exist_ok=True)
    print(f"home: {home} (commands and their output: {home / 'learning.log'})", flush=True)
    timings: dict[str, float] = {}

    timed("generate", timings, foundry, "run", str(CORPUS), home=home)
    banded = home / "banded"
    timed("export in band", timings, foundry, "export", "--band", *BAND, "--out", str(banded),
          home=home)  # fmt: skip
    whole = (home / "tasksets" / "docqa" / "latest").resolve()
    trained_on = (banded / "docqa" / "latest").resolve()
    print(f"taskset: {json.dumps(splits(whole))}")
    print(f"in band: {json.dumps(splits(trained_on))}", flush=True)

    runs = {"trained": [], "control": ["--shuffle-rewards"]}
    models = {}
    for name, extra in runs.items():
        out = home / "train" / name
        train = ["train", "--taskset", str(trained_on), "--steps", str(args.steps)]
        train += ["--learning-rate", str(args.learning_rate), "--audit", "0", "--out", str(out)]
        train += ["--completion-tokens", str(args.completion_tokens)]
        summary = timed(f"train {name}", timings, foundry, *train, *extra, home=home)
        result = json.loads(summary)
        rewards = [r for r in result["rewards"] if r is not None]
        print(
            f"  {name}: {result['steps']} steps on {result['rows']} tasks (left out:"
            f" {result['left_out']}); reward first 5 steps"
            f" {sum(rewards[:5]) / max(1, len(rewards[:5])):.3f},"
            f" last 5 {sum(rewards[-5:]) / max(1, len(rewards[-5:])):.3f}",
            flush=True,
        )
        models[name] = out / "model"
    before = Path(policy_path(EMBEDDED, home / "cache" / "policy"))
    policies = [before, models["trained"], models["control"]]
    evaluate = ["evaluate", str(whole), "--attempts", str(args.attempts)]
    for policy in policies:
        evaluate += ["--policy", str(policy)]
    measured = json.loads(timed("evaluate", timings, foundry, *evaluate, "--json", home=home))
    roles = ("before", "trained", "control")
    named = ", ".join(
        f"{role}: {parse_policy(str(policy)).label}"
        for role, policy in zip(roles, policies, strict=True)
    )
    print(f"held-out: {measured['tasks']} {measured['split']} tasks, {args.attempts} attempts each")
    print(f"  policies: {named}")
    print(measured["table"], flush=True)
    versus = trained_against_control(home, whole, measured["evaluations"])
    print(
        f"trained vs control: {versus['mean']:+.3f} [{versus['low']:+.3f}, {versus['high']:+.3f}]"
        f" over {versus['tasks']} tasks (up {versus['improved']}, down {versus['worsened']});"
        f" {versus['confidence']:.0%} intervals",
        flush=True,
    )
    figures = {
        "steps": args.steps,
        "learning_rate": args.learning_rate,
        "completion_tokens": args.completion_tokens,
        "attempts": args.attempts,
        "taskset": splits(whole),
        "trained_on": splits(trained_on),
        "evaluations": dict(zip(roles, measured["evaluations"], strict=True)),
        "differences_from_before": dict(zip(roles[1:], measured["differences"], strict=True)),
        "trained_vs_control": versus,
        "table": measured["table"],
        "seconds": timings,
    }
    (home / "learning.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(f"figures: {home / 'learning.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
