"""What a taskset version says about itself: the tallies an export keeps while it writes the
rows (by kind, band, pool, split and harness; the difficulty histogram; the sources they draw
on) and the manifest made of them, with the commit it was made at. The card written from the
manifest is `data.export.dataset_card`."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data.lake import SCHEMA_VERSION, controls_by_judge, funnel, utcnow
from data.public_names import source_root

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
    # attempts per task (least and most) and the summed width of the pass rates' intervals
    attempts_min: int | None = None
    attempts_max: int = 0
    interval_width_sum: float = 0.0
    by_source: Counter[str] = field(default_factory=Counter)  # tasks per source root
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
        n = row["pass_n"]
        self.attempts_min = n if self.attempts_min is None else min(self.attempts_min, n)
        self.attempts_max = max(self.attempts_max, n)
        self.interval_width_sum += row["pass_ci_high"] - row["pass_ci_low"]
        self.by_source.update(source_roots(row))
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
            "pass_rate_interval": {
                "tasks": self.n_tasks,
                "min_n": self.attempts_min,
                "max_n": self.attempts_max,
                "mean_width": self.interval_width_sum / self.n_tasks if self.n_tasks else None,
            },
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


def source_roots(row: dict[str, Any]) -> set[str]:
    """The roots of what a taskset row draws on, as licences are configured for them
    (`public_names.source_root`): its source documents, trace or world, and its repository."""
    refs = json.loads(row["source"]) if row["source"] else []
    roots = {source_root(ref["path"]) for ref in refs if ref.get("path")}
    return roots | ({source_root(row["repo"])} if row["repo"] else set())


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
