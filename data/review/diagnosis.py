"""Why a taskset came out thin: where the material was lost (stage, reason, count) and what
would most likely change it, in words a new user can act on.

Read from the lake (the funnel of every stage, the judges' control figures, the chunks made and
used), so the run's last lines, `foundry stats` and the report page say the same thing. A
taskset of at least `[export] explain_below` tasks needs no explaining.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from data.config import FoundryConfig
from data.export import taskset_version
from data.lake import Lake, latest_controls

TOP_REASONS = 3  # of each stage's losses, the largest named

GENERATOR = "a stronger generator model ([roles.generator] model and base_url in foundry.toml)"
JUDGE = "a stronger judge model ([[roles.judges]] model and base_url in foundry.toml)"
# what would most likely change a loss, by its reason (the losses' stage where none is named)
REMEDIES = {
    "unsupported_format": "convert those files to a supported format (docs/sources.md)",
    "empty": "those files hold no text after conversion: check them, or leave them out",
    "no_text_layer": "those PDFs are scans without a text layer: OCR them first",
    "too_large": "raise [ingest] max_file_bytes, or split those files",
    "no_usable_sentence": (
        "those passages hold no sentence with a name, number or date to ask about: material"
        " with more facts, or larger chunks ([ingest] chunk_chars)"
    ),
    "no_valid_candidate": "",  # the sum of its candidates' losses, each remedied on its own
    "invalid_structured_output": f"the generator's replies did not fit the schema: {GENERATOR}",
    "not_answerable_with_source": (
        f"the judges could not answer the questions from their passages: {GENERATOR} writes"
        f" answerable questions, {JUDGE} reads them better"
    ),
    "held_judge_below_controls": (
        f"held until a judge that passes its control items decides: {JUDGE}, then run again"
    ),
    "closed_book_leak": (
        "the judges answered without the passage (general knowledge or a question that gives"
        " its answer away): material specific to your organisation, or a stronger generator"
    ),
    "judge_error": "the judges' server failed: check it, then run again (retried)",
    "budget_exhausted": "raise the budget (--max-tokens, --max-cost), then run again",
    "internal_error": (
        "a fault of taskfoundry's, its detail in `foundry stats --json`: please report it;"
        " the next run retries those items"
    ),
}


@dataclass(frozen=True)
class Loss:
    stage: str
    reason: str
    count: int


@dataclass(frozen=True)
class Diagnosis:
    exported: int
    threshold: int
    losses: list[Loss]  # in pipeline order, each stage's largest first
    judges: list[str]  # each judge below the bar, with its figure
    remedies: list[str]  # the likeliest first

    def lines(self) -> list[str]:
        """The explanation as the run's last lines (and `foundry stats`' section)."""
        out = [
            f"only {self.exported} tasks exported (fewer than [export] explain_below ="
            f" {self.threshold}); where the material was lost:"
        ]
        out += [f"  {loss.stage}: {loss.count} {loss.reason}" for loss in self.losses]
        out += [f"  {judge}" for judge in self.judges]
        if self.remedies:
            out.append("what would most likely change it:")
            out += [f"  - {remedy}" for remedy in self.remedies]
        return out


def diagnose(
    lake: Lake,
    config: FoundryConfig,
    stages: dict[str, dict[str, Any]],
    exported: int,
    made_by: Mapping[str, Sequence[str]],
) -> Diagnosis | None:
    """The explanation of a taskset of `exported` tasks, or None where it holds enough.
    `stages` is the funnel's (`data.lake.stage_funnel.funnel(lake)["stages"]`); `made_by` maps
    each generation stage to the kinds its families make (`families.stage_kinds()`)."""
    threshold = config.export.explain_below
    if exported >= threshold:
        return None
    losses = _losses(stages)
    judges = [_judge_figure(row) for row in latest_controls(lake) if not row["competent"]]
    remedies: Counter[str] = Counter()
    for loss in losses:
        remedies[_remedy(loss, bool(judges))] += loss.count
    unused = _unused_chunks(lake, config, made_by)
    if unused:
        losses.insert(0, Loss("generate", "chunks not used (generate.max_chunks)", unused))
        remedies[f"raise [generate] max_chunks ({unused} chunks were never used)"] += unused
    ranked = [remedy for remedy, _ in remedies.most_common() if remedy]
    return Diagnosis(exported, threshold, losses, judges, ranked)


def diagnose_latest(
    lake: Lake,
    config: FoundryConfig,
    stages: dict[str, dict[str, Any]],
    made_by: Mapping[str, Sequence[str]],
) -> Diagnosis | None:
    """`diagnose` for the latest exported version of the configured taskset (none: 0 tasks)."""
    try:
        version = taskset_version(config.home / "tasksets" / config.export.name)
    except FileNotFoundError:
        return diagnose(lake, config, stages, 0, made_by)
    manifest = json.loads((version / "manifest.json").read_text())
    return diagnose(lake, config, stages, int(manifest["n_tasks"]), made_by)


def _losses(stages: dict[str, dict[str, Any]]) -> list[Loss]:
    losses = []
    for stage, counts in stages.items():
        lost = [
            (reason.split(":", 1)[1], n)
            for reason, n in counts["reasons"].items()
            if not reason.startswith("done:")
        ]
        lost.sort(key=lambda pair: -pair[1])
        losses += [Loss(stage, reason, n) for reason, n in lost[:TOP_REASONS]]
    return losses


def _remedy(loss: Loss, judges_below_bar: bool) -> str:
    if loss.stage == "verify" and judges_below_bar and loss.reason != "verifier_self_check":
        return JUDGE
    if loss.reason in REMEDIES:
        return REMEDIES[loss.reason]
    return GENERATOR if loss.stage == "candidate" else ""  # any other: a check's rejection


def _judge_figure(row: dict[str, Any]) -> str:
    return (
        f"verify: judge {row['role']} ({row['model']}) got {row['correct']} of {row['items']}"
        f" control items right ({row['accuracy']:.0%}, below {row['threshold']:.0%})"
    )


def _unused_chunks(lake: Lake, config: FoundryConfig, made_by: Mapping[str, Sequence[str]]) -> int:
    """Chunks the generator never saw because `generate.max_chunks` capped it (none where no
    kind the `generate` stage makes is in scope)."""
    in_scope = config.scope.makes(*made_by.get("generate", ()))
    if config.generate.max_chunks is None or not in_scope:
        return 0
    total = lake.rows("SELECT count(*) AS n FROM chunks")[0]["n"]
    return max(0, total - config.generate.max_chunks)
