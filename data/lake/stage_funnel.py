"""The funnel: what every stage took in, kept and rejected (with reasons), and what it cost."""

from __future__ import annotations

from collections import Counter
from typing import Any

from data.costs import PRICED_SQL, UNPRICED_SQL, Cost, row_cost
from data.lake.store import Lake

# The difficulty row `d` a calibrate-stage status `s` measured: the row its stage wrote. Rows
# written before difficulty named its stage are matched as they were then: the status detail
# named `solver|harness`, and an empty detail (older still) stood for the task's only row.
MEASURED_BY = """(d.stage = s.stage OR d.stage IS NULL AND (
    s.detail = d.solver_model || '|' || d.harness OR s.detail = '' AND NOT EXISTS (
    SELECT 1 FROM status o WHERE o.item_id = d.task_id AND o.stage LIKE 'calibrate%'
    AND o.detail = d.solver_model || '|' || d.harness)))"""

# The solver's model calls behind each task's attempts in one environment, as the recording
# proxy saw them (a multi-turn attempt makes several).
_CALLS_PER_TASK = """
WITH calls_per_rollout AS (SELECT rollout_id, count(*) AS n FROM proxy_calls GROUP BY 1),
calls_per_task AS (
    SELECT a.task_id, a.harness, a.solver_model AS solver, sum(coalesce(r.n, 0)) AS calls
    FROM attempts a LEFT JOIN calls_per_rollout r USING (rollout_id) GROUP BY ALL
)"""

# Attempts the grader could not judge (reward NULL), by what made them and why: no failures,
# left out of every pass rate.
_NO_VERDICT_SQL = """
SELECT coalesce(stage, 'calibrate') AS stage, no_verdict AS reason, count(*) AS n
FROM attempts WHERE reward IS NULL GROUP BY ALL ORDER BY ALL
"""

STAGES = ("ingest", "chunk", "generate", "candidate", "verify", "calibrate", "review", "repair")

# Variants the repair loop made (not the remedies of variants, which keep their repair step),
# with what became of them.
_VARIANTS_SQL = """
SELECT json_extract_string(t.lineage, '$.repair.direction') AS direction,
       json_extract_string(t.lineage, '$.knobs.level') AS level,
       v.status AS verified, c.reason AS band, count(*) AS n
FROM tasks t
LEFT JOIN status v ON v.item_id = t.task_id AND v.stage = 'verify'
LEFT JOIN status c ON c.item_id = t.task_id AND c.stage = 'calibrate' AND c.status = 'done'
WHERE json_extract_string(t.lineage, '$.repair.root') IS NOT NULL
  AND json_extract_string(t.lineage, '$.remedied.parent') IS NULL
GROUP BY ALL ORDER BY ALL
"""


# Code tasks (those with a workspace) by kind and how each was written, with the gold
# self-check's outcome.
_CODE_SQL = """
SELECT t.kind, coalesce(json_extract_string(t.lineage, '$.knobs.statement'), 'template') AS
       statement, coalesce(v.status || ':' || v.reason, 'not verified') AS self_check,
       count(*) AS n
FROM tasks t LEFT JOIN status v ON v.item_id = t.task_id AND v.stage = 'verify'
WHERE json_extract_string(t.workspace, '$.repo_id') IS NOT NULL
GROUP BY ALL ORDER BY ALL
"""


# Document questions by form: a question the generator wrote (by its first word: who, when, how
# many...) or the fill-in-the-blank of the evidence; how many of each verification accepted. A
# document question is a task whose generator chose its style (`question_style`), whatever its
# kind is called.
_QUESTION_FORMS_SQL = """
SELECT CASE WHEN json_extract_string(t.lineage, '$.knobs.question_style') = 'cloze'
            THEN 'cloze' ELSE 'question: ' || coalesce(nullif(lower(regexp_extract(
                json_extract_string(t.prompt, '$[#-1].content'),
                '^(how many|how much|\\w+)', 1)), ''), '?') END AS form,
       count(*) AS tasks, count(*) FILTER (WHERE v.status = 'done') AS accepted
FROM tasks t LEFT JOIN status v ON v.item_id = t.task_id AND v.stage = 'verify'
WHERE json_extract_string(t.lineage, '$.knobs.question_style') IS NOT NULL
  AND json_extract_string(t.lineage, '$.repair.root') IS NULL
GROUP BY ALL ORDER BY tasks DESC, form
"""


# Tool worlds, with the fidelity of those built from traces and what became of them.
_WORLDS_SQL = """
SELECT w.world_id, split_part(w.origin, ':', 1) AS origin, w.written_by,
       round(w.fidelity, 3) AS fidelity, coalesce(b.reason, 'ingested') AS outcome,
       count(t.task_id) AS tasks
FROM worlds w
LEFT JOIN status b ON b.stage = 'trace_worlds' AND starts_with(b.detail, w.world_id || ' ')
LEFT JOIN tasks t ON json_extract_string(t.world, '$.world_id') = w.world_id
GROUP BY ALL ORDER BY w.world_id
"""


def funnel(lake: Lake) -> dict[str, Any]:
    """Per stage: item counts by outcome and reason; plus LLM usage (live calls vs cache hits)."""
    rows = lake.rows(
        "SELECT stage, status, reason, count(*) AS n FROM status GROUP BY ALL ORDER BY ALL"
    )
    stages: dict[str, dict[str, Any]] = {
        s: {"items": 0, "done": 0, "rejected": 0, "failed": 0, "reasons": {}} for s in STAGES
    }
    for row in rows:
        stage = stages.setdefault(
            row["stage"], {"items": 0, "done": 0, "rejected": 0, "failed": 0, "reasons": {}}
        )
        stage["items"] += row["n"]
        stage[row["status"]] += row["n"]
        stage["reasons"][f"{row['status']}:{row['reason']}"] = row["n"]
    usage = usage_by_role(lake)
    calibrated = (
        " FROM difficulty d JOIN status s ON s.item_id = d.task_id AND s.status = 'done'"
        f" AND s.stage LIKE 'calibrate%' AND {MEASURED_BY}"
    )
    bands = lake.rows(
        f"SELECT s.stage, d.band, count(*) AS n {calibrated} GROUP BY ALL ORDER BY ALL"
    )
    attempts = lake.rows(
        f"{_CALLS_PER_TASK} SELECT s.stage, t.kind, d.solver_model AS solver, d.harness,"
        " coalesce(d.method, 'fixed') AS method, coalesce(d.prior, '') AS prior,"
        " count(*) AS tasks, avg(d.n) AS mean, min(d.n) AS min, max(d.n) AS max,"
        " avg(coalesce(c.calls, 0)) AS calls"
        f"{calibrated} JOIN tasks t ON t.task_id = d.task_id LEFT JOIN calls_per_task c"
        " ON c.task_id = d.task_id AND c.harness = d.harness AND c.solver = d.solver_model"
        " GROUP BY ALL ORDER BY ALL"
    )
    proxy = lake.rows(
        "SELECT count(*) AS calls, count(DISTINCT rollout_id) AS rollouts,"
        " count(*) FILTER (WHERE error <> '') AS errors,"
        " count(*) FILTER (WHERE stream) AS streamed FROM proxy_calls"
    )[0]
    commits = lake.rows("SELECT kind, count(*) AS n FROM commits GROUP BY 1 ORDER BY 1")
    return {
        "stages": stages,
        "repos": {
            "repos": lake.rows("SELECT count(*) AS n FROM repos")[0]["n"],
            "commits": {row["kind"]: row["n"] for row in commits},
            "replayed": lake.rows("SELECT count(*) AS n FROM replays")[0]["n"],
            "code_tasks": lake.rows(_CODE_SQL),
        },
        "repair": _repair_summary(lake, stages["repair"]),
        "llm": {row.pop("role"): row for row in usage},
        "bands": {r["band"]: r["n"] for r in bands if r["stage"] == "calibrate"},
        "recalibrated_bands": _nested(r for r in bands if r["stage"] != "calibrate"),
        "attempts": attempts,
        "no_verdict": lake.rows(_NO_VERDICT_SQL),
        "worlds": lake.rows(_WORLDS_SQL),
        "question_forms": lake.rows(_QUESTION_FORMS_SQL),
        "proxy": proxy,
        "cost": _cost_per_task(usage, stages["verify"]["done"]),
    }


def _cost_per_task(usage: list[dict[str, Any]], accepted: int) -> dict[str, Any]:
    """All live LLM spend (`data.costs.cost`: null where a model has no price), and per task
    accepted by verification."""
    tokens, cost = _spend(usage)
    per_task = cost.scaled(1 / accepted).to_json() if accepted else {}
    return {
        **cost.to_json(),
        "tokens": tokens,
        "accepted_tasks": accepted,
        "usd_per_accepted_task": per_task.get("cost_usd"),
        "usd_per_accepted_task_at_least": per_task.get("cost_usd_at_least"),
        "tokens_per_accepted_task": round(tokens / accepted) if accepted else None,
    }


def per_task_text(cost: dict[str, Any]) -> str:
    """The line "per accepted task (N): $x, T tokens" from the funnel's `cost`, or "" without
    accepted tasks."""
    if not cost["accepted_tasks"]:
        return ""
    per_task = Cost.from_json(cost).scaled(1 / cost["accepted_tasks"])
    return (
        f"per accepted task ({cost['accepted_tasks']}): {per_task.text()},"
        f" {cost['tokens_per_accepted_task']:,} tokens"
    )


def _repair_summary(lake: Lake, stage: dict[str, Any]) -> dict[str, Any]:
    """What the repair loop did: outcomes per out-of-band task, and its variants by direction,
    level, verification and band."""
    variants = lake.rows(_VARIANTS_SQL)

    def count(key: str) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for row in variants:
            if row[key] is not None:
                counts[row[key]] += row["n"]
        return dict(sorted(counts.items()))

    return {
        "outcomes": {k.removeprefix("done:"): n for k, n in stage["reasons"].items()},
        "variants": sum(row["n"] for row in variants),
        "by_direction": count("direction"),
        "by_level": count("level"),
        "verified": sum(row["n"] for row in variants if row["verified"] == "done"),
        "bands": count("band"),
    }


def _nested(rows) -> dict[str, dict[str, int]]:
    nested: dict[str, dict[str, int]] = {}
    for row in rows:
        nested.setdefault(row["stage"], {})[row["band"]] = row["n"]
    return nested


def format_funnel(summary: dict[str, Any]) -> str:
    """A plain-text rendering of `funnel()` for the terminal."""
    lines = ["stage            items  done  rejected  failed"]
    for name, stage in summary["stages"].items():
        lines.append(
            f"{name:<15} {stage['items']:>6} {stage['done']:>5} {stage['rejected']:>9}"
            f" {stage['failed']:>7}"
        )
        for reason, n in sorted(stage["reasons"].items(), key=lambda kv: -kv[1]):
            if not reason.startswith("done:"):
                lines.append(f"    {reason:<40} {n:>6}")
    lines.append("")
    if summary["repos"]["repos"]:
        repos = summary["repos"]
        lines.append(
            f"repositories: {repos['repos']}; commits: {_pairs(repos['commits'])};"
            f" replayed with fail-to-pass tests: {repos['replayed']}"
        )
        for row in repos["code_tasks"]:
            lines.append(
                f"code tasks: {row['kind']} (statement: {row['statement']}):"
                f" {row['n']}, gold self-check {row['self_check']}"
            )
    forms = summary["question_forms"]
    if forms:
        total = sum(row["tasks"] for row in forms)
        lines.append(
            "document questions by form: "
            + ", ".join(
                f"{row['form']} {row['tasks']} ({row['tasks'] / total:.0%}, {row['accepted']}"
                " accepted)"
                for row in forms
            )
        )
    lines.append("bands: " + (", ".join(f"{k}={v}" for k, v in summary["bands"].items()) or "-"))
    for stage, counts in summary["recalibrated_bands"].items():
        lines.append(f"bands ({stage}): " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    for a in summary["attempts"]:
        prior = f", prior {a['prior']}" if a["prior"] else ""
        lines.append(
            f"attempts per task, {a['kind']}, {a['solver']} via {a['harness']}"
            f" ({a['method']}{prior}): mean {a['mean']:.1f}, min {a['min']}, max {a['max']}"
            f" over {a['tasks']} tasks; solver calls per task {a['calls']:.1f}"
        )
    if summary["no_verdict"]:
        lines.append(
            "attempts without a verdict (left out of pass rates): "
            + ", ".join(f"{r['stage']} {r['reason']} {r['n']}" for r in summary["no_verdict"])
        )
    r = summary["repair"]
    if r["outcomes"]:
        lines.append("repair outcomes: " + _pairs(r["outcomes"]))
        lines.append(
            f"repaired tasks: {r['variants']} variants ({_pairs(r['by_direction'])};"
            f" {_pairs(r['by_level'])}): {r['verified']} verified;"
            f" bands {_pairs(r['bands']) or '-'}"
        )
    p = summary["proxy"]
    lines.append(
        f"solver rollouts through the proxy: {p['calls']} calls in {p['rollouts']} rollouts"
        f" ({p['errors']} with errors, {p['streamed']} streamed)"
    )
    lines.append("")
    lines.append("llm role      calls  cache_hits  errors  prompt_tok  completion_tok  cost_usd")
    for role, u in summary["llm"].items():
        lines.append(
            f"{role:<12} {u['calls']:>6} {u['cache_hits']:>11} {u['errors']:>7}"
            f" {u['prompt_tokens']:>11} {u['completion_tokens']:>15} {_usd(u['cost_usd'])}"
        )
    unpriced = sorted({m for u in summary["llm"].values() for m in u["unpriced_models"]})
    if unpriced:
        lines.append(f"cost_usd unknown: no price for {', '.join(unpriced)}")
    cost = summary["cost"]
    lines.append(f"all live calls: {Cost.from_json(cost).text()}, {cost['tokens']:,} tokens")
    if cost["accepted_tasks"]:
        lines.append(per_task_text(cost))
    return "\n".join(lines)


def _usd(usd: float | None) -> str:
    return f"{usd:>9.4f}" if usd is not None else f"{'unknown':>9}"


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def run_usage(lake: Lake, run_id: str) -> dict[str, int]:
    """LLM requests of one run: live calls, cache hits, errors, tokens."""
    row = lake.rows(
        "SELECT count(*) FILTER (WHERE NOT cached) AS calls,"
        " count(*) FILTER (WHERE cached) AS cache_hits,"
        " count(*) FILTER (WHERE NOT ok) AS errors,"
        " coalesce(sum(prompt_tokens + completion_tokens) FILTER (WHERE NOT cached), 0)::BIGINT"
        " AS tokens"
        " FROM llm_calls WHERE run_id = ?",
        [run_id],
    )[0]
    return {k: int(v) for k, v in row.items()}


def run_spend(lake: Lake, run_id: str) -> tuple[int, float, tuple[str, ...]]:
    """The live tokens one run's recorded LLM calls have spent, their cost at known prices,
    and the models of those with none (`Budget.settle`'s arguments)."""
    tokens, cost = _spend(usage_by_role(lake, run_id))
    return tokens, cost.priced_usd, cost.unpriced


def _spend(usage: list[dict[str, Any]]) -> tuple[int, Cost]:
    """Live tokens and cost summed over `usage_by_role` rows."""
    tokens = sum(row["prompt_tokens"] + row["completion_tokens"] for row in usage)
    cost = sum((Cost.from_json(row) for row in usage), Cost())
    return tokens, cost


def usage_by_role(lake: Lake, run_id: str | None = None) -> list[dict[str, Any]]:
    """LLM requests per role (of one run, or of all): live calls, cache hits, errors, live
    tokens, cost (`data.costs.cost`: `cost_usd` null where a model has no price)."""
    where, params = ("WHERE run_id = ?", [run_id]) if run_id is not None else ("", [])
    rows = lake.rows(
        "SELECT role, count(*) FILTER (WHERE NOT cached) AS calls,"
        " count(*) FILTER (WHERE cached) AS cache_hits,"
        " count(*) FILTER (WHERE NOT ok) AS errors,"
        " coalesce(sum(prompt_tokens) FILTER (WHERE NOT cached), 0)::BIGINT AS prompt_tokens,"
        " coalesce(sum(completion_tokens) FILTER (WHERE NOT cached), 0)::BIGINT"
        f" AS completion_tokens, {PRICED_SQL} AS priced_usd, {UNPRICED_SQL} AS unpriced"
        f" FROM llm_calls {where} GROUP BY role ORDER BY role",
        params,
    )
    for row in rows:
        row.update(row_cost(row).to_json())
        del row["priced_usd"], row["unpriced"]
    return rows


def failed_calls(lake: Lake, run_ids: list[str]) -> dict[str, int] | None:
    """When the runs `run_ids` made LLM calls and every one failed: the failures by reason,
    most frequent first; else None."""
    if not run_ids or not lake.shards("llm_calls"):
        return None
    rows = lake.rows(
        "SELECT error, count(*) AS n, bool_and(NOT ok) AS all_failed FROM llm_calls"
        " WHERE list_contains(?, run_id) GROUP BY error ORDER BY n DESC, error",
        [run_ids],
    )
    if not rows or not all(row["all_failed"] for row in rows):
        return None
    return {row["error"]: int(row["n"]) for row in rows}
