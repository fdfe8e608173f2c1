"""Export: verified, calibrated tasks as a versioned parquet taskset with manifest and card.

Layout: `<base>/<name>/vNNNN/data/train-00000.parquet` and `data/eval-00000.parquet` (the
splits as files, as the Hub and `datasets` read them), `manifest.json`, `README.md` (the card,
whose front matter names the splits), with `latest` pointing at the newest version. A version
is written in a hidden folder and renamed into place, so readers never see half a taskset; an
export identical to the latest one (same fingerprint) is removed again and leaves the latest in
place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from data.export.dataset_card import FamilyCard, Licensing, dataset_card
from data.export.parts import Fingerprint, SplitParts
from data.export.splits import (
    DEFAULT_EVAL_SHARE,
    WITHHELD,
    Grouping,
    SplitPlan,
    group_keys,
    plan_splits,
)
from data.export.taskset_card import Tally
from data.export.versions import (
    AWAITING_APPROVAL,
    awaits_approval,
    latest_version,
    point_latest,
    read_manifest,
    version_number,
)
from data.lake import (
    AGREEMENT_SQL,
    MEASURED_BY,
    Lake,
    SplitAssignment,
    WorldSetup,
    cost_breakdown,
    export_filter,
    review_states,
    utcnow,
    version_gates,
)
from data.names import slug
from data.public_names import public_origin, public_sources, public_workspace
from data.repos import checkout
from data.runtime.corpus_index import CORPUS_FILE
from data.runtime.corpus_index import HARNESS as SEARCH_HARNESS
from data.runtime.workspace_bundle import FOLDER as BUNDLES
from data.runtime.workspace_bundle import bundle_name, pack

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
TASKSET_SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("kind", pa.string()),
        ("prompt", pa.list_(MESSAGE)),
        ("answer", pa.string()),
        ("verifier", pa.string()),
        ("evidence", pa.string()),
        ("source", pa.string()),
        ("pass_rate", pa.float64()),
        ("pass_n", pa.int64()),
        ("pass_ci_low", pa.float64()),
        ("pass_ci_high", pa.float64()),
        ("band", pa.string()),
        ("pool", pa.string()),
        ("learnability", pa.float64()),
        ("solver_model", pa.string()),
        ("harness", pa.string()),
        ("verdicts", pa.string()),
        ("consensus", pa.string()),
        ("rubric", pa.string()),
        ("hackable", pa.bool_()),
        ("mutants_killed", pa.float64()),
        ("lineage", pa.string()),
        ("schema_version", pa.string()),
        ("repo", pa.string()),
        ("base_revision", pa.string()),
        ("workspace", pa.string()),
        ("environment", pa.string()),
        ("world", pa.string()),
        ("tools", pa.string()),
        ("trace_id", pa.string()),
        ("intent", pa.string()),
        ("intent_share", pa.float64()),
        ("split", pa.string()),
    ]
)

# One task per repair family (an original and the variants the repair loop made of it, which
# share its answer and evidence) among those within the pass-rate filter: the member in the
# band, else the one the repair moved furthest, so a trainer never sees one fact twice. Each
# task carries its judge verdicts, panel decisions (agreement only where several judges voted)
# and rubric items as lists (a trace task also its trace's, the panel's rating of the trace), so
# the export reads one ordered stream.
# Its split (`data.export.splits`) is added in Python. Parameters: $1 the calibrate stage, $2 the
# kinds exported once reviewed, $3 the kinds made from traces, $4 and $5 the pass-rate range, $6
# whether only tasks a person accepted are exported (`data.lake.curation`).
_CHOSEN_SQL = """
WITH latest_clustering AS (
    SELECT item_id FROM status WHERE stage = 'intents' AND status = 'done'
    ORDER BY recorded_at DESC LIMIT 1
), intent_of AS (
    SELECT unnest(json_extract_string(trace_ids, '$[*]')) AS trace_id, label, share
    FROM intents WHERE clustering_id IN (SELECT item_id FROM latest_clustering)
), chosen AS (
    SELECT t.task_id, t.kind, t.prompt, t.answer, t.verifier, t.evidence, t.source,
           d.pass_rate, d.n AS pass_n, d.ci_low AS pass_ci_low, d.ci_high AS pass_ci_high,
           d.band, d.pool, d.learnability, d.solver_model, d.harness,
           coalesce(r.hackable, false) AS hackable, g.share AS mutants_killed,
           t.lineage, t.schema_version,
           json_extract_string(t.workspace, '$.origin') AS repo,
           json_extract_string(t.workspace, '$.base') AS base_revision, t.workspace,
           t.environment, t.world, CASE WHEN list_contains($3, t.kind)
               THEN json_extract_string(t.source, '$[0].source_id') END AS trace_id,
           i.label AS intent, i.share AS intent_share,
           coalesce(json_extract_string(t.lineage, '$.repair.root'), t.task_id) AS family,
           coalesce(json_extract(t.lineage, '$.repair.step')::INTEGER, 0) AS step
    FROM tasks t
    JOIN difficulty d USING (task_id)
    LEFT JOIN reviews r USING (task_id)
    LEFT JOIN gates g ON g.task_id = t.task_id AND g.gate = 'mutants'
    LEFT JOIN intent_of i ON list_contains($3, t.kind)
        AND i.trace_id = json_extract_string(t.source, '$[0].source_id')
    JOIN status s ON s.item_id = t.task_id AND s.stage = $1 AND s.status = 'done' AND {measured}
    WHERE t.task_id IN (SELECT item_id FROM status WHERE stage = 'verify' AND status = 'done')
      AND (NOT list_contains($2, t.kind)  -- a reviewed family's task must have been reviewed
           OR t.task_id IN (SELECT item_id FROM status WHERE stage = 'review' AND status = 'done'))
      AND (NOT list_contains($3, t.kind)  -- a trace task's trace must still be in the lake
           OR json_extract_string(t.source, '$[0].source_id') IN (SELECT trace_id FROM traces))
      AND d.pass_rate BETWEEN $4 AND $5
      AND {curated}
    QUALIFY row_number() OVER (
        PARTITION BY family ORDER BY band = 'in_band' DESC, step DESC, task_id) = 1
)"""
_TASKS_SQL = (
    _CHOSEN_SQL
    + """, verdicts_of AS (
    SELECT task_id, list({{'check': "check", 'judge': judge, 'judge_model': judge_model,
                          'prompt_version': prompt_version, 'decision': decision,
                          'confidence': confidence, 'reason': reason}}
                         ORDER BY "check", judge) AS items
    FROM verdicts GROUP BY task_id
), consensus_of AS (
    SELECT task_id, list({{'check': "check", 'rule': rule, 'decision': decision, 'passes': passes,
                          'fails': fails, 'errors': errors, 'agreement': {agreement}}}
                         ORDER BY "check") AS items
    FROM consensus GROUP BY task_id
), rubric_of AS (
    SELECT task_id, list({{'item': item, 'failure': failure, 'attempt_id': attempt_id}}
                         ORDER BY attempt_id, item) AS items
    FROM rubrics GROUP BY task_id
)
SELECT c.* EXCLUDE (family, step),
       tv.items AS _task_verdicts, rv.items AS _trace_verdicts,
       tc.items AS _task_consensus, rc.items AS _trace_consensus, ru.items AS _rubric
FROM chosen c
LEFT JOIN verdicts_of tv ON tv.task_id = c.task_id
LEFT JOIN verdicts_of rv ON rv.task_id = c.trace_id
LEFT JOIN consensus_of tc ON tc.task_id = c.task_id
LEFT JOIN consensus_of rc ON rc.task_id = c.trace_id
LEFT JOIN rubric_of ru ON ru.task_id = c.task_id
ORDER BY c.task_id
"""
)
# What a task's split groups are made of (`data.export.splits.group_keys`), for every chosen task.
_GROUPS_SQL = (
    _CHOSEN_SQL
    + " SELECT task_id, source, workspace, lineage, world, trace_id, intent FROM chosen"
    + " ORDER BY task_id"
)


ROWS_PER_BATCH = 10_000  # rows read from the lake at a time
UNSTATED = Licensing()  # no licence stated, for the taskset or its sources
# JSON columns a task may lack: null when it does, never the JSON text `null`
JSON_OR_NULL = ("workspace", "environment", "world", "evidence")


def _chosen(sql: str) -> str:
    """`sql` (built on `_CHOSEN_SQL`) with its calibration and review conditions filled in."""
    return sql.format(measured=MEASURED_BY, curated=export_filter("$6"), agreement=AGREEMENT_SQL)


@dataclass(frozen=True)
class ExportKinds:
    """What the export needs to know of the task kinds (`families.export_kinds()` gives the
    registered families'): which are exported only once reviewed, and which are made from a
    production trace (their rows carry `trace_id` and `intent`, and a task is kept only while
    its trace is in the lake)."""

    reviewed: tuple[str, ...] = ()
    from_traces: tuple[str, ...] = ()
    # each generation stage -> the kinds its families make (the manifest's cost per family)
    made_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # kind -> what the dataset card says of its family's tasks
    cards: Mapping[str, FamilyCard] = field(default_factory=dict)


@dataclass(frozen=True)
class ExportResult:
    path: Path
    n_tasks: int
    written: bool  # False when identical to the latest version


def export_taskset(
    lake: Lake,
    name: str,
    base: Path,
    band: tuple[float, float] | None = None,
    rows_per_part: int = 50_000,
    solver: str | None = None,
    *,
    kinds: ExportKinds,
    groupings: Sequence[Grouping],
    search_turns: int | None = None,
    eval_share: float = DEFAULT_EVAL_SHARE,
    name_by_solver: bool = True,
    loop: dict[str, Any] | None = None,
    review_required: bool = False,
    publish: bool = True,
    licensing: Licensing = UNSTATED,
) -> ExportResult:
    """Write the next version of taskset `name` under `base` (or reuse an identical latest).
    Difficulty is the pipeline's calibration, or with `solver` that model's re-calibration
    (exported as `<name>-<solver>`); `kinds` says which kinds wait for review and which carry
    a trace, `groupings` how the tasks of each source type group (`sources.groupings()`);
    `search_turns` is the doc-search harness's turn limit the run calibrated with,
    recorded with the corpus for whoever runs those tasks again. Each task is put in the `train`
    or `eval` split, groups of related tasks on one side (`data.export.splits`; about `eval_share`
    of the groups drawn to eval, sides kept in the lake). Rows stream from the lake in batches into
    the parquet parts, so memory stays flat however many tasks there are. `foundry loop` keeps
    its rounds under one name (`name_by_solver` False) and says which round a version is in
    `loop` (the manifest's `loop` entry; a round is its own version). Reviewers' decisions
    hold (`data.lake.curation`): a rejected or edited-away task is never exported, and with
    `review_required` only tasks a person accepted (or made by an edit) are. Without
    `publish`, a new version waits for approval (`data.export.versions.approve_version`)
    before it is `latest`. `licensing` is what the card declares of the licences."""
    low, high = band or (0.0, 1.0)
    stage = f"calibrate:{solver}" if solver else "calibrate"
    sql = _chosen(_TASKS_SQL)
    if solver and name_by_solver:
        name = f"{name}-{slug(solver)}"
    root = base / name
    latest = latest_version(root)
    version = f"v{(version_number(latest) if latest else 0) + 1:04d}"
    tmp = root / f".{version}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tally = Tally()
    fingerprint = Fingerprint()
    trees: dict[str, dict[str, Any]] = {}  # bundle name -> a code task's workspace
    params = [stage, list(kinds.reviewed), list(kinds.from_traces), low, high, review_required]
    splits = _split_plan(lake, params, eval_share, groupings)
    names = _document_names(lake)
    states = review_states(lake)
    reviewed: Counter = Counter()
    try:
        with SplitParts(tmp, rows_per_part, TASKSET_SCHEMA) as parts:
            for batch in lake.batches(sql, params, ROWS_PER_BATCH):
                kept = [row for row in batch if row["task_id"] in splits.split_of]
                for row in kept:
                    reviewed[states.get(row["task_id"], "unreviewed")] += 1
                    workspace = json.loads(row["workspace"] or "null")
                    if workspace:
                        trees[bundle_name(workspace)] = workspace
                rows = [
                    _taskset_row(row, splits.split_of[row["task_id"]], names, tally) for row in kept
                ]
                for row in rows:
                    fingerprint.add(row)
                parts.write(rows)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    corpus = _write_corpus(lake, tmp, fingerprint) if tally.by_harness[SEARCH_HARNESS] else 0
    if corpus and search_turns is not None:
        fingerprint.add({"search_turns": search_turns})
    bundled = _write_workspaces(lake, tmp, trees)
    if loop is not None:
        fingerprint.add({"loop": loop})
    digest = fingerprint.hexdigest(band)
    if latest is not None and read_manifest(latest).get("fingerprint") == digest:
        shutil.rmtree(tmp)
        if (root / "latest").resolve() != latest.resolve() and not awaits_approval(latest):
            point_latest(root, latest.name)  # a crash came between the rename and the link
        return ExportResult(latest, tally.n_tasks, written=False)
    parts.stamp(digest)
    manifest = tally.manifest(lake, name, version, band, digest, parts.files())
    manifest["licenses"] = licensing.manifest_entry(tally.by_source)
    manifest["cost"] = cost_breakdown(lake, kinds.made_by)
    manifest["gates"] = version_gates(lake, list(splits.split_of))
    manifest["split"] = {
        "eval_share": eval_share,
        "grouping": {g.label: g.text for g in groupings},
        "tasks": splits.counts(),
        "files": parts.names,
        "groups": splits.groups,
        "withheld": {WITHHELD: len(splits.withheld)} if splits.withheld else {},
    }
    if loop is not None:
        manifest["loop"] = loop
    left_out = Counter(state for state in states.values() if state in ("rejected", "edited"))
    manifest["review"] = {
        "required": review_required,
        "exported": {"accepted": reviewed["accepted"], "unreviewed": reviewed["unreviewed"]},
        "left_out": {"rejected": left_out["rejected"], "edited": left_out["edited"]},
    }
    searched = {"file": CORPUS_FILE, "chunks": corpus, "max_turns": search_turns}
    manifest["corpus"] = searched if corpus else None
    manifest["workspaces"] = {"folder": BUNDLES, "trees": bundled} if bundled else None
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    (tmp / "README.md").write_text(dataset_card(manifest, kinds.cards))
    if not publish:
        (tmp / AWAITING_APPROVAL).write_text("approve or reject it: docs/deployment.md\n")
    final = root / version
    os.replace(tmp, final)
    if publish:
        point_latest(root, version)
    return ExportResult(final, tally.n_tasks, written=True)


def _split_plan(
    lake: Lake, params: list[Any], eval_share: float, groupings: Sequence[Grouping]
) -> SplitPlan:
    """The sides of the tasks the export chooses, given the groups' sides kept in the lake; the
    groups this export is the first to place are kept there too."""
    keys_of = {
        row["task_id"]: group_keys(row, groupings)
        for batch in lake.batches(_chosen(_GROUPS_SQL), params, ROWS_PER_BATCH)
        for row in batch
    }
    known = {r["group_key"]: r["split"] for r in lake.rows("SELECT group_key, split FROM splits")}
    plan = plan_splits(keys_of, known, eval_share)
    if plan.assigned:
        now = utcnow()
        lake.write(
            "splits",
            [
                SplitAssignment(group_key=k, split=side, eval_share=eval_share, assigned_at=now)
                for k, side in sorted(plan.assigned.items())
            ],
        )
    return plan


def _write_corpus(lake: Lake, folder: Path, fingerprint: Fingerprint) -> int:
    """The corpus the search tasks' environment searches (every chunk, as calibration indexed
    it) into `corpus.parquet`, streamed; returns the chunks written. It is part of the
    version's fingerprint: a new document makes a new version even with the same tasks."""
    schema = pa.schema([("chunk_id", pa.string()), ("text", pa.string())])
    written = 0
    with pq.ParquetWriter(folder / CORPUS_FILE, schema) as writer:
        sql = "SELECT chunk_id, text FROM chunks ORDER BY chunk_id"
        for batch in lake.batches(sql, (), ROWS_PER_BATCH):
            for row in batch:
                fingerprint.add(row)
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            written += len(batch)
    return written


def _write_workspaces(lake: Lake, folder: Path, trees: dict[str, dict[str, Any]]) -> int:
    """The code tasks' repository trees at their base revisions, one bundle each under
    `workspaces/` (`data.runtime.workspace_bundle`), checked out of the lake's mirrors, so that
    a code task can be graded without its repository; returns the trees written. A tree whose
    mirror is gone is not written (its tasks then need the repository)."""
    if not trees:
        return 0
    mirrors = {
        r["repo_id"]: Path(r["mirror"]) for r in lake.rows("SELECT repo_id, mirror FROM repos")
    }
    written = 0
    for name, workspace in sorted(trees.items()):
        mirror = mirrors.get(workspace["repo_id"])
        if mirror is None or not mirror.is_dir():
            continue
        (folder / BUNDLES).mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="foundry-bundle-") as scratch:
            pack(
                checkout(mirror, workspace["base"], Path(scratch) / "tree"), folder / BUNDLES / name
            )
        written += 1
    return written


def _document_names(lake: Lake) -> dict[str, str]:
    """The names ingest recorded for the documents, by source id (an older lake's documents
    have none: `public_sources` names them by their files)."""
    sql = "SELECT source_id, name FROM sources WHERE name <> ''"
    return {r["source_id"]: r["name"] for r in lake.rows(sql)}


def _taskset_row(
    row: dict[str, Any], split: str, names: dict[str, str], tally: Tally
) -> dict[str, Any]:
    """A query row as a taskset row in `split`: its verdicts, panel decisions and rubric as
    JSON (a trace task's own first, then its trace's), its tools from its world, its sources
    and repository by the names an export may show (`names`: the documents'); counted into
    `tally`."""
    row["source"] = public_sources(row["source"], names)
    row["workspace"] = public_workspace(row["workspace"])
    for column in JSON_OR_NULL:
        row[column] = json_or_null(row[column])
    row["repo"] = public_origin(row["repo"]) if row["repo"] else row["repo"]
    verdicts = (row.pop("_task_verdicts") or []) + (row.pop("_trace_verdicts") or [])
    consensus = (row.pop("_task_consensus") or []) + (row.pop("_trace_consensus") or [])
    row["rubric"] = json.dumps(row.pop("_rubric") or [], sort_keys=True)
    row["verdicts"] = json.dumps(verdicts, sort_keys=True)
    row["consensus"] = json.dumps(consensus, sort_keys=True)
    row["tools"] = _tools(row["world"])
    row["split"] = split
    tally.add(row, verdicts, consensus)
    return row


def json_or_null(text: str | None) -> str | None:
    """A JSON column's text, or a real null where it holds none (the lake stores an absent
    workspace, environment or world as the JSON text `null`; a reader's `IS NULL` must find
    it)."""
    return None if text is None or text.strip() == "null" else text  # not parsed: patches


def _tools(world: str | None) -> str | None:
    """A tool-use task's tools in the OpenAI tools format (JSON), from its world."""
    setup = json.loads(world) if world else None
    return json.dumps(WorldSetup.model_validate(setup).tools, sort_keys=True) if setup else None
