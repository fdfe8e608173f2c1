"""What `foundry stats` shows about traces: formats, scrubbing, intents and the tasks made."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from data.lake import Lake

# The latest clustering's intents, with the tasks made from each intent's traces.
_INTENTS_SQL = """
WITH latest AS (
    SELECT item_id FROM status WHERE stage = 'intents' AND status = 'done'
    ORDER BY recorded_at DESC LIMIT 1
), members AS (
    SELECT cluster, label, named_by, size, share,
           unnest(json_extract_string(trace_ids, '$[*]')) AS trace_id
    FROM intents WHERE clustering_id IN (SELECT item_id FROM latest)
)
SELECT m.cluster, m.label, m.named_by, m.size, m.share, count(t.task_id) AS tasks
FROM members m LEFT JOIN tasks t ON json_extract_string(t.source, '$[0].source_id') = m.trace_id
GROUP BY ALL ORDER BY m.size DESC, m.cluster
"""


def trace_report(lake: Lake) -> dict[str, Any]:
    """Traces by format, values scrubbed by kind, the intents, and tasks per generator."""
    scrubbed: Counter[str] = Counter()
    for row in lake.rows("SELECT scrubbed FROM traces"):
        scrubbed.update(json.loads(row["scrubbed"]))
    formats = lake.rows("SELECT format, count(*) AS n FROM traces GROUP BY 1 ORDER BY 1")
    generators = lake.rows(
        "SELECT json_extract_string(lineage, '$.generator') AS generator, count(*) AS n"
        " FROM tasks GROUP BY 1 ORDER BY 1"
    )
    return {
        "traces": {r["format"]: r["n"] for r in formats},
        "scrubbed": dict(sorted(scrubbed.items())),
        "intents": lake.rows(_INTENTS_SQL),
        "tasks_by_generator": {r["generator"]: r["n"] for r in generators},
    }


def format_trace_report(report: dict[str, Any]) -> str:
    """A plain-text rendering of `trace_report()`."""
    lines = ["tasks by generator: " + _pairs(report["tasks_by_generator"])]
    if not report["traces"]:
        return "\n".join(lines)
    lines.append(f"traces: {sum(report['traces'].values())} ({_pairs(report['traces'])})")
    lines.append("scrubbed before storing: " + (_pairs(report["scrubbed"]) or "nothing"))
    if report["intents"]:
        lines.append("intents (latest clustering)        traces  share  tasks")
        for row in report["intents"]:
            name = row["label"] + ("" if row["named_by"] == "model" else " *")
            lines.append(
                f"  {name[:32]:<32} {row['size']:>6} {row['share']:>6.1%} {row['tasks']:>6}"
            )
        if any(row["named_by"] != "model" for row in report["intents"]):
            lines.append("  * named by its distinctive words: the model's name was unusable")
    return "\n".join(lines)


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())
