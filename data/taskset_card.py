"""What a taskset version says about itself: the tallies an export keeps while it writes the
rows (by kind, band, pool, split and harness; the difficulty histogram), and the dataset card
(the version's README), with the commit it was made at."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data.funnel import funnel
from data.gates import gate_lines
from data.judge_controls import controls_by_judge
from data.records import SCHEMA_VERSION, utcnow

HISTOGRAM_BINS = 10


BANDS = ("too_easy", "in_band", "too_hard")


@dataclass
class Tally:
    """The manifest's counts, built up one taskset row at a time."""

    n_tasks: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    by_intent: Counter[str] = field(default_factory=Counter)
    by_band: Counter[str] = field(default_factory=Counter)
    by_pool: Counter[str] = field(default_factory=Counter)
    by_level: Counter[str] = field(default_factory=Counter)
    by_harness: Counter[str] = field(default_factory=Counter)  # where the pass rates were measured
    # tasks per pass-rate bin of width 1/HISTOGRAM_BINS, the last bin closed ([0.9, 1.0])
    histogram: list[int] = field(default_factory=lambda: [0] * HISTOGRAM_BINS)
    # per judge check: the panel decisions the taskset carries, those with an agreement figure
    # (more than one judge voted) and the sum of their agreement, and each judge's votes on it
    decisions: Counter[str] = field(default_factory=Counter)
    agreed: Counter[str] = field(default_factory=Counter)
    agreement_sum: Counter[str] = field(default_factory=Counter)
    votes: dict[str, Counter[tuple[str, str]]] = field(default_factory=dict)
    hackable: int = 0
    repaired: int = 0
    generators: set[str] = field(default_factory=set)
    judges: set[str] = field(default_factory=set)
    solvers: set[str] = field(default_factory=set)

    def add(self, row: dict[str, Any], verdicts: list[dict], consensus: list[dict]) -> None:
        lineage = json.loads(row["lineage"])
        knobs = lineage["knobs"]
        self.n_tasks += 1
        self.by_kind[row["kind"]] += 1
        if row["intent"]:
            self.by_intent[row["intent"]] += 1
        self.by_band[row["band"]] += 1
        self.by_pool[row["pool"]] += 1
        self.by_level[knobs.get("level", "base")] += 1
        self.by_harness[row["harness"]] += 1
        self.histogram[min(int(row["pass_rate"] * HISTOGRAM_BINS), HISTOGRAM_BINS - 1)] += 1
        for decision in consensus:
            check = decision["check"]
            self.decisions[check] += 1
            if decision["agreement"] is not None:
                self.agreed[check] += 1
                self.agreement_sum[check] += decision["agreement"]
        for verdict in verdicts:
            if verdict["decision"] != "error":
                judge = (verdict["judge"], verdict["judge_model"])
                self.votes.setdefault(verdict["check"], Counter())[judge] += 1
        self.hackable += bool(row["hackable"])
        self.repaired += lineage.get("repair") is not None
        if lineage["model"]:
            self.generators.add(lineage["model"])
        self.judges.update(v["judge_model"] for v in verdicts)
        self.solvers.add(row["solver_model"])

    def judge_checks(
        self, controls: dict[tuple[str, str], dict[str, Any]]
    ) -> dict[str, dict[str, Any]]:
        """Per judged check: its panel decisions, the judges that voted on them (role, model,
        votes and control figures, `controls` by role and model; None: not measured) and the
        mean agreement over the decisions more than one judge voted on (None: there are none,
        as with a panel of one)."""
        return {
            check: {
                "decisions": count,
                "decisions_with_several_votes": self.agreed[check],
                "mean_agreement": (
                    round(self.agreement_sum[check] / self.agreed[check], 3)
                    if self.agreed[check]
                    else None
                ),
                "judges": [
                    {
                        "role": role,
                        "model": model,
                        "votes": votes,
                        "controls": controls.get((role, model)),
                    }
                    for (role, model), votes in sorted(self.votes.get(check, Counter()).items())
                ],
            }
            for check, count in sorted(self.decisions.items())
        }

    def manifest(self, lake, name, version, band, fingerprint, parts) -> dict[str, Any]:
        return {
            "name": name,
            "version": version,
            "schema_version": SCHEMA_VERSION,
            "created_at": utcnow().isoformat(),
            "n_tasks": self.n_tasks,
            "by_kind": dict(sorted(self.by_kind.items())),
            "by_intent": dict(sorted(self.by_intent.items())),
            "by_band": {b: self.by_band.get(b, 0) for b in BANDS},
            "by_pool": dict(sorted(self.by_pool.items())),
            "difficulty_histogram": self.histogram,
            "judge_agreement": self.judge_checks(controls_by_judge(lake)),
            "hackable": self.hackable,
            "by_level": dict(sorted(self.by_level.items())),
            "by_harness": dict(sorted(self.by_harness.items())),
            "repaired": self.repaired,
            "band_filter": list(band) if band else None,
            "models": {
                "generator": sorted(self.generators),
                "judges": sorted(self.judges),
                "solver": sorted(self.solvers),
            },
            "funnel": funnel(lake),
            "git_sha": _git_sha(),
            "fingerprint": fingerprint,
            "files": parts,
        }


def histogram_lines(counts: list[int]) -> str:
    """A text bar chart of `difficulty_histogram` counts, one line per bin."""
    width = max(counts, default=0) or 1
    lines = []
    for i, count in enumerate(counts):
        low, high = i / len(counts), (i + 1) / len(counts)
        bar = "#" * round(30 * count / width)
        lines.append(f"{low:.1f}-{high:.1f} | {bar} {count}")
    return "\n".join(lines)


def _git_sha() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def judged_lines(checks: dict[str, dict[str, Any]]) -> str:
    """The manifest's `judge_agreement` as the card's lines, one per check."""
    lines = []
    for check, v in checks.items():
        judges = "; ".join(judge_text(judge) for judge in v["judges"]) or "no judge voted"
        several = v["decisions_with_several_votes"]
        agreement = (
            "no agreement figure (no decision had more than one vote)"
            if v["mean_agreement"] is None
            else f"mean agreement {v['mean_agreement']} over the {several} decisions more than"
            " one judge voted on"
        )
        lines.append(f"- {check}: {v['decisions']} panel decisions by {judges}; {agreement}")
    return "\n".join(lines) or "- no judged checks"


def judge_text(judge: dict[str, Any]) -> str:
    """A judge of a check with its votes and control figure, for the card."""
    figure = judge["controls"]
    if figure is None:
        said = "control items not measured"
    else:
        bar = "at or above it on every kind" if figure["competent"] else "below it on some kind"
        said = (
            f"{figure['correct']} of {figure['items']} control items right"
            f" ({figure['accuracy']:.0%}; bar {figure['threshold']:.0%}, {bar})"
        )
    return f"{judge['role']} ({judge['model']}, {judge['votes']} votes; {said})"


def dataset_card(manifest: dict[str, Any]) -> str:
    bands = ", ".join(f"{k}: {v}" for k, v in manifest["by_band"].items())
    levels = ", ".join(f"{k}: {v}" for k, v in manifest["by_level"].items()) or "-"
    models = manifest["models"]
    kinds = ", ".join(f"{k}: {v}" for k, v in manifest["by_kind"].items()) or "-"
    harnesses = ", ".join(f"{k}: {v}" for k, v in manifest["by_harness"].items()) or "-"
    split = manifest["split"]
    withheld = sum(split["withheld"].values())
    judged = judged_lines(manifest["judge_agreement"])
    gates = gate_lines(manifest["gates"])
    return f"""# {manifest["name"]} {manifest["version"]}

Verifiable tasks generated by taskfoundry, each built backwards from a known answer and
calibrated by the solver's pass rate. Question answering (`doc_qa`): a known answer and an
evidence quote in a source document, checked by a judge panel (answerable with the source, not
without it). Code (`commit_replay`, `function_rebuild`, `bug_fix`, `commit_sequence`): a
known-reachable repository state, verified by its tests in a sandbox (the reference patch passes
them, the empty patch does not). Reports (`doc_report`): a request for a short report on
several passages of a document, graded fact by fact against a rubric of facts quoted from them.
Production traces (`trace_answer`, `near_miss`, `tool_replay`): a real request whose outcome a
judge panel rated, scrubbed of secrets and personal data before generation.

- by kind: {kinds}
- tasks: {manifest["n_tasks"]} ({bands}); flagged hackable: {manifest["hackable"]}
- difficulty levels: {levels}; moved by the repair loop: {manifest["repaired"]}
- environments the pass rates were measured in (`harness`): {harnesses}
- band filter: {manifest["band_filter"] or "none (every verified task, labelled)"}
- split: train {split["tasks"]["train"]} tasks ({split["groups"]["train"]} groups), eval
  {split["tasks"]["eval"]} tasks ({split["groups"]["eval"]} groups); withheld as their groups
  are on both sides: {withheld}
- generator: {", ".join(models["generator"]) or "-"}; judges: {", ".join(models["judges"]) or "-"};
  solver: {", ".join(models["solver"]) or "-"}
- schema version {manifest["schema_version"]}, code {manifest["git_sha"]}

## Difficulty

The solver's pass rate per task (`pass_rate`), in bins of 0.1:

```
{histogram_lines(manifest["difficulty_histogram"])}
```

## Judges

Who decided each judged check of these tasks, with each judge's control figure (before verify,
each judge answers control items made from the run's chunks: one below the bar decides no check;
where every judge is below it only the leak gate, `closed_book`, of a question its source answers
by construction is asked, and it can only reject), and the panel's mean agreement over the
decisions more than one judge voted on (a lone vote gives no agreement figure):

{judged}

## Code admission gates

A code task is exported only past every admission gate, each of which must have run: a usable
reference passing 3 fresh runs, an outside check on inputs no test shows, no copy of its module
where an attempt runs, the empty and a do-nothing attempt scoring 0, tests that kill a mutant of
the reference, and the red team's admission attacks seen to run and scoring 0
(docs/reward-integrity.md). A gate that could not run keeps a task out; it is never counted as
passed.

{gates}

## Columns

`task_id` (content hash), `kind`, `prompt` (chat messages: a document question's system message
holds the passages it may read at the open-book levels, none at the search levels), `answer`
(gold), `verifier` (JSON spec: normalised exact match or token F1 >= threshold; type
`llm_equivalence` asks a judge when that fails, and enforces its `rubric` items), `evidence` and
`source` (JSON), `pass_rate`, `pass_n`, `pass_ci_low`/`pass_ci_high` (Wilson interval), `band`
(`too_easy`/`in_band`/`too_hard`), `pool` (prime-rl: hard/normal/easy), `learnability` (4p(1-p)),
`solver_model`, `harness` (the environment the pass rate was measured in and the one to train in:
`open_book`, one reply to the prompt as it is; `doc_search`, search and read tools over the corpus,
the source withheld: the corpus is `corpus.parquet` beside the parts, `chunk_id` and `text`,
BM25-searched as `data/runtime/corpus_index.py` does, within the turn limit the manifest's `corpus`
entry records (`max_turns`); `closed_book`, the question alone, only where a user
opted in to closed-book training; `code_single_turn`, `tool_replay`, `world_tools` or
`world_actions`, a world's tools through native tool calls or JSON actions), `verdicts` (each
judge's decision and reason, JSON), `consensus` (the panel's decision per check with its rule, vote
counts and agreement, JSON), `rubric` (checkable items distilled from failed solver attempts, each
with the attempt it came from, JSON; grader-side only, never show it to the policy), `hackable` (a
judge panel found a rewarded attempt that games the verifier and no tighter verifier closed it:
filter these out or grade them with care), `lineage` (JSON; `knobs` hold the difficulty level: for
documents `evidence_hinted` < `evidence` < `passage` < `distractors` (open book: the evidence
sentence, with the answer's shape, then alone; its passage; the passage among its nearest
neighbours) < `hinted` < `pointed` < `base` < `paraphrased` < `two_hop` (search); a variant made by
the repair loop has `repair`: its `parent`, the original task `root`, the `step`, the levels it
went through (`path`) and the `direction`; a task whose verifier was tightened after a reward hack
has `remedied`: the `remedy` and its `parent`), `schema_version`. A taskset holds one task per
original: the variant in the band if the repair loop found one.

`split` is `train` or `eval`. Related tasks are grouped (a question by its source documents, a
code task by the commits it starts from or reproduces, a trace task by its trace and intent
cluster, a tool-use task by its world goal) and a group is on one side only, so no document,
commit, intent or goal has tasks on both; the manifest's `split` entry states the grouping, the
eval share and the counts. Sides are kept in the lake, so a later export keeps every task's.
Train on `train` only (`foundry train` does) and measure on `eval` (`foundry evaluate`).

Code tasks: the `prompt` holds the statement and the files that matter, and asks for whole files
or a unified diff; `answer` is the reference patch; `verifier` has type `unit_tests` with the
`fail_to_pass` tests (must pass) and `pass_to_pass` tests (must keep passing), as pytest node
ids; `repo` and `base_revision` name the starting commit, and `workspace` (JSON) rebuilds it:
check out `base` from `origin`, apply `start_patch` (the task's start, e.g. a function body
taken out), apply the attempt (edits to test files set aside), apply `test_patch` (tests the
solver does not see), run the tests. The tree of `base` is also here, so the task needs no
clone: `workspaces/<repo_id>-<base>.tar.gz` (`data/runtime/workspace_bundle.py` unpacks it),
written for each repository the lake still mirrors. A `commit_sequence` asks for consecutive
commits as `## Step N` sections; its verifier's `checkpoints` hold each step's test patch and
tests, run after that step; its reward is the share of checkpoints passed. Code tasks have no
evidence, judge verdicts or rubric.

Report tasks (`doc_report`): the `prompt`'s system message holds the passages, the user turn
the request for a short report; `answer` is a reference report. `verifier` has type `rubric`
with `by_item` true: its `rubric` lists the checkable facts a report must state, `evidence[i]`
the verbatim quote (and chunk) of fact `i`, and `source` the passages with their locations. A
judge panel decides each fact by majority; the reward is the share of facts met, a pass every
fact. Its `negatives` hold the reference without its last passage's facts, which it rejects.
The `rubric` column lists the facts failed attempts left out. Levels (`lineage.knobs.level`):
`outlined` (the request says how many facts to state from which passage) < `passages` <
`distractors` (the passages shuffled among the chunks nearest the first by embedding).

Trace tasks: the `prompt` is the production conversation up to the reply (tool calls and results
written into the assistant's messages). `trace_answer` (the reply was rated good): `answer` is
the observed reply and `verifier` has type `rubric` (a judge checks every item; the answer is a
reference, not the only right reply). `near_miss` (rated bad): `answer` is a corrected reply,
the rubric names the failure, and the verifier's `negatives` hold the failed reply, which it
rejects. `tool_replay`: `verifier` has type `tool_calls` (the calls, names and key arguments,
an attempt must make in order) and `environment` (JSON) holds the tools offered and the results
recorded in production, to replay. `trace_id` names the trace; `intent` is its cluster's label
and `intent_share` that cluster's share of production traffic, to sample a taskset like
production or to over-sample rare intents. `verdicts` and `consensus` include the panel's
`trace_outcome` rating.

Tool-use tasks (`world_tool_use`): planted on a simulated world (typed tables and tools declared
as SQL), worked backwards from a known final state. The `prompt` is the world's system message
and the user's instruction; `tools` (JSON) the world's tools in the OpenAI tools format; `world`
(JSON) holds `world_id` (`name@version#hash`), the world `spec`, the `initial` state (rows per
table) and `max_turns`. `verifier` has type `world_state`: its `tool_calls` are the gold calls
and `final_state` the state they leave. An attempt passes when its calls, replayed on the world
from the initial state, leave exactly that state and, where the task asks a question, its final
answer matches `answer` (`data.runtime.answer_match` at threshold 1: normalised, numbers by value;
`judges.world_state.grade`). Before a task is accepted the gold calls pass (twice, with the same
outcome), doing nothing fails, and for a change a plausible wrong call sequence (another record)
leaves another state; a judge panel checked that the instruction asks for what the gold calls
do. `lineage.knobs` hold
the level (`guided` < `base` < `described` < `two_steps`: steps, distractor records, records
named by another value instead of their id).

## Load

```python
from datasets import load_dataset
ds = load_dataset("parquet", data_files="part-*.parquet")["train"]
```
"""
