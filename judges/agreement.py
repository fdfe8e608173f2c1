"""Judge quality figures: agreement with the panel's consensus, pairwise Cohen's kappa, errors."""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from typing import Any

from data.lake import AGREEMENT_SQL, Lake, latest_controls


def cohen_kappa(a: list[str], b: list[str]) -> float | None:
    """Cohen's kappa of two raters' labels on the same items (None when undefined)."""
    if len(a) != len(b):
        raise ValueError("raters must label the same items")
    if not a:
        return None
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    freq_a, freq_b = Counter(a), Counter(b)
    expected = sum(freq_a[label] * freq_b[label] for label in freq_a) / (n * n)
    if expected == 1.0:
        return None  # both raters always gave the same single label: kappa is undefined
    return (observed - expected) / (1 - expected)


def judge_report(lake: Lake) -> dict[str, Any]:
    """Per judge: verdicts, error rate, agreement with consensus; per pair: kappa; per check:
    decisions and the mean agreement over those more than one judge voted on."""
    per_judge = lake.rows(
        "SELECT v.judge, any_value(v.judge_model) AS model, count(*) AS verdicts,"
        " count(*) FILTER (WHERE v.decision = 'error') AS errors,"
        " count(*) FILTER (WHERE v.decision <> 'error' AND c.decision <> 'undecided') AS voted,"
        " count(*) FILTER (WHERE v.decision = c.decision) AS agreed"
        ' FROM verdicts v JOIN consensus c USING (task_id, "check")'
        " GROUP BY v.judge ORDER BY v.judge"
    )
    judges = {
        row["judge"]: {
            "model": row["model"],
            "verdicts": row["verdicts"],
            "error_rate": row["errors"] / row["verdicts"],
            "agreement_with_consensus": row["agreed"] / row["voted"] if row["voted"] else None,
        }
        for row in per_judge
    }
    votes: dict[str, dict[tuple[str, str], str]] = {}
    for row in lake.rows(
        "SELECT judge, task_id, \"check\", decision FROM verdicts WHERE decision <> 'error'"
    ):
        votes.setdefault(row["judge"], {})[(row["task_id"], row["check"])] = row["decision"]
    pairs = {}
    for first, second in combinations(sorted(votes), 2):
        shared = sorted(set(votes[first]) & set(votes[second]))
        pairs[f"{first} ~ {second}"] = {
            "items": len(shared),
            "kappa": cohen_kappa(
                [votes[first][k] for k in shared], [votes[second][k] for k in shared]
            ),
        }
    panel = lake.rows(
        f'SELECT "check", count(*) AS decisions, avg({AGREEMENT_SQL}) AS mean_agreement,'
        f" count({AGREEMENT_SQL}) AS several_votes,"
        " count(*) FILTER (WHERE decision = 'undecided') AS undecided"
        ' FROM consensus GROUP BY "check" ORDER BY "check"'
    )
    equivalence = lake.rows(
        "SELECT 'verdicts' AS source, decision AS outcome, count(*) AS n FROM verdicts"
        " WHERE reason LIKE 'equivalence panel:%' GROUP BY ALL"
        " UNION ALL SELECT 'attempts', CASE WHEN reward >= 1 THEN 'pass' ELSE 'fail' END,"
        " count(*) FROM attempts WHERE reason LIKE 'equivalence panel:%' GROUP BY ALL"
        " ORDER BY ALL"
    )
    return {
        "judges": judges,
        "controls": {row.pop("role"): row for row in latest_controls(lake)},
        "pairs": pairs,
        "seed_variance": seed_variance(lake),
        "panel": {r.pop("check"): r for r in panel},
        "equivalence": {f"{r['source']}:{r['outcome']}": r["n"] for r in equivalence},
    }


def seed_variance(lake: Lake) -> dict[str, dict[str, Any]]:
    """Per judge: verdicts re-asked with another seed, and how often the decision flipped."""
    rows = lake.rows(
        "SELECT judge, any_value(judge_model) AS model,"
        " count(*) FILTER (WHERE decision <> 'error' AND original <> 'error') AS compared,"
        " count(*) FILTER (WHERE decision <> original AND decision <> 'error'"
        " AND original <> 'error') AS flips,"
        " list(DISTINCT temperature ORDER BY temperature) AS temperatures"
        " FROM verdict_reruns GROUP BY judge ORDER BY judge"
    )
    return {
        row.pop("judge"): {
            **row,
            "flip_rate": row["flips"] / row["compared"] if row["compared"] else None,
        }
        for row in rows
    }


def format_judge_report(report: dict[str, Any]) -> str:
    lines = ["judge      model                          verdicts  errors  agree_w_consensus"]
    for name, j in report["judges"].items():
        agree = j["agreement_with_consensus"]
        lines.append(
            f"{name:<10} {j['model'][:30]:<30} {j['verdicts']:>8} {j['error_rate']:>7.1%}"
            f"  {'-' if agree is None else f'{agree:.1%}':>17}"
        )
    for name, c in report["controls"].items():
        verdict = (
            "able" if c["competent"] else f"BELOW {c['threshold']:.0%}: give it a stronger model"
        )
        lines.append(
            f"controls {name} ({c['model'][:30]}): {c['correct']} of {c['items']} control items"
            f" right ({c['accuracy']:.0%}), {verdict}"
        )
    if not report["controls"]:
        lines.append("controls: not measured yet (the run's first verify measures them)")
    for check, p in report["panel"].items():
        agreement = (
            "-  (no decision had more than one vote)"
            if p["mean_agreement"] is None
            else f"{p['mean_agreement']:.2f} over {p['several_votes']}"
        )
        lines.append(
            f"panel {check:<12} decisions {p['decisions']:>5}  undecided {p['undecided']}"
            f"  mean agreement {agreement}"
        )
    for pair, p in report["pairs"].items():
        kappa = "-" if p["kappa"] is None else f"{p['kappa']:.2f}"
        lines.append(f"kappa {pair}: {kappa} over {p['items']} items")
    if not report["pairs"]:
        lines.append("kappa: needs a panel of two or more judges")
    for name, v in report["seed_variance"].items():
        rate = "-" if v["flip_rate"] is None else f"{v['flip_rate']:.1%}"
        temps = ", ".join(f"{t:g}" for t in v["temperatures"])
        lines.append(
            f"seed variance {name}: {v['flips']} of {v['compared']} verdicts flipped ({rate})"
            f" when re-asked with another seed at temperature {temps}"
        )
    if not report["seed_variance"]:
        lines.append("seed variance: not measured (foundry judges variance)")
    decisions = report["equivalence"]
    lines.append(
        f"equivalence decisions: {sum(decisions.values())}"
        + (" (" + ", ".join(f"{k}={v}" for k, v in decisions.items()) + ")" if decisions else "")
    )
    return "\n".join(lines)
