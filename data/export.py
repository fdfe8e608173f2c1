"""Export: verified, calibrated tasks as a versioned parquet taskset with manifest and card.

Layout: `<base>/<name>/vNNNN/part-00000.parquet`, `manifest.json`, `README.md`, with `latest`
pointing at the newest version. A version is written in a hidden folder and renamed into place,
so readers never see half a taskset; an export identical to the latest one (same fingerprint)
is removed again and leaves the latest in place.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from data.funnel import MEASURED_BY, funnel
from data.git import checkout
from data.lake import Lake
from data.names import slug
from data.records import SCHEMA_VERSION, SplitAssignment, WorldSetup, utcnow
from data.runtime.corpus_index import CORPUS_FILE
from data.runtime.corpus_index import HARNESS as SEARCH_HARNESS
from data.runtime.workspace_bundle import FOLDER as BUNDLES
from data.runtime.workspace_bundle import bundle_name, pack
from data.splits import DEFAULT_EVAL_SHARE, GROUPING, WITHHELD, SplitPlan, group_keys, plan_splits

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
# task carries its judge verdicts, panel decisions and rubric items as lists (a trace task also
# its trace's, the panel's rating of the trace), so the export reads one ordered stream.
# Its split (`data.splits`) is added in Python. Parameters: $1 the calibrate stage, $2 the kinds
# exported once reviewed, $3 the kinds made from traces, $4 and $5 the pass-rate range.
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
                          'fails': fails, 'errors': errors, 'agreement': agreement}}
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
# What a task's split groups are made of (`data.splits.group_keys`), for every chosen task.
_GROUPS_SQL = (
    _CHOSEN_SQL
    + " SELECT task_id, source, workspace, lineage, world, trace_id, intent FROM chosen"
    + " ORDER BY task_id"
)


ROWS_PER_BATCH = 10_000  # rows read from the lake at a time


@dataclass(frozen=True)
class ExportKinds:
    """What the export needs to know of the task kinds (`families.export_kinds()` gives the
    registered families'): which are exported only once reviewed, and which are made from a
    production trace (their rows carry `trace_id` and `intent`, and a task is kept only while
    its trace is in the lake)."""

    reviewed: tuple[str, ...] = ()
    from_traces: tuple[str, ...] = ()


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
    search_turns: int | None = None,
    eval_share: float = DEFAULT_EVAL_SHARE,
    name_by_solver: bool = True,
    loop: dict[str, Any] | None = None,
) -> ExportResult:
    """Write the next version of taskset `name` under `base` (or reuse an identical latest).
    Difficulty is the pipeline's calibration, or with `solver` that model's re-calibration
    (exported as `<name>-<solver>`); `kinds` says which kinds wait for review and which carry
    a trace; `search_turns` is the doc-search harness's turn limit the run calibrated with,
    recorded with the corpus for whoever runs those tasks again. Each task is put in the `train`
    or `eval` split, groups of related tasks on one side (`data.splits`; about `eval_share` of
    the groups drawn to eval, sides kept in the lake). Rows stream from the lake in batches into
    the parquet parts, so memory stays flat however many tasks there are. `foundry loop` keeps
    its rounds under one name (`name_by_solver` False) and says which round a version is in
    `loop` (the manifest's `loop` entry; a round is its own version)."""
    low, high = band or (0.0, 1.0)
    stage = f"calibrate:{solver}" if solver else "calibrate"
    sql = _TASKS_SQL.format(measured=MEASURED_BY)
    if solver and name_by_solver:
        name = f"{name}-{slug(solver)}"
    root = base / name
    latest = _latest_version(root)
    version = f"v{(_version_number(latest) if latest else 0) + 1:04d}"
    tmp = root / f".{version}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tally = _Tally()
    fingerprint = _Fingerprint()
    trees: dict[str, dict[str, Any]] = {}  # bundle name -> a code task's workspace
    params = [stage, list(kinds.reviewed), list(kinds.from_traces), low, high]
    splits = _split_plan(lake, params, eval_share)
    try:
        with _PartWriter(tmp, rows_per_part) as parts:
            for batch in lake.batches(sql, params, ROWS_PER_BATCH):
                kept = [row for row in batch if row["task_id"] in splits.split_of]
                rows = [_taskset_row(row, splits.split_of[row["task_id"]], tally) for row in kept]
                for row in rows:
                    fingerprint.add(row)
                    workspace = json.loads(row["workspace"] or "null")
                    if workspace:
                        trees[bundle_name(workspace)] = workspace
                parts.write(pa.Table.from_pylist(rows, schema=TASKSET_SCHEMA))
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
    if latest is not None and _manifest(latest).get("fingerprint") == digest:
        shutil.rmtree(tmp)
        if (root / "latest").resolve() != latest.resolve():
            _point_latest(root, latest.name)  # a crash came between the rename and the link
        return ExportResult(latest, tally.n_tasks, written=False)
    manifest = tally.manifest(lake, name, version, band, digest, parts.names)
    manifest["split"] = {
        "eval_share": eval_share,
        "grouping": GROUPING,
        "tasks": splits.counts(),
        "groups": splits.groups,
        "withheld": {WITHHELD: len(splits.withheld)} if splits.withheld else {},
    }
    if loop is not None:
        manifest["loop"] = loop
    searched = {"file": CORPUS_FILE, "chunks": corpus, "max_turns": search_turns}
    manifest["corpus"] = searched if corpus else None
    manifest["workspaces"] = {"folder": BUNDLES, "trees": bundled} if bundled else None
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    (tmp / "README.md").write_text(_dataset_card(manifest))
    final = root / version
    os.replace(tmp, final)
    _point_latest(root, version)
    return ExportResult(final, tally.n_tasks, written=True)


def _split_plan(lake: Lake, params: list[Any], eval_share: float) -> SplitPlan:
    """The sides of the tasks the export chooses, given the groups' sides kept in the lake; the
    groups this export is the first to place are kept there too."""
    keys_of = {
        row["task_id"]: group_keys(row)
        for batch in lake.batches(_GROUPS_SQL.format(measured=MEASURED_BY), params, ROWS_PER_BATCH)
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


def _write_corpus(lake: Lake, folder: Path, fingerprint: _Fingerprint) -> int:
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


def _taskset_row(row: dict[str, Any], split: str, tally: _Tally) -> dict[str, Any]:
    """A query row as a taskset row in `split`: its verdicts, panel decisions and rubric as
    JSON (a trace task's own first, then its trace's), its tools from its world; counted into
    `tally`."""
    verdicts = (row.pop("_task_verdicts") or []) + (row.pop("_trace_verdicts") or [])
    consensus = (row.pop("_task_consensus") or []) + (row.pop("_trace_consensus") or [])
    row["rubric"] = json.dumps(row.pop("_rubric") or [], sort_keys=True)
    row["verdicts"] = json.dumps(verdicts, sort_keys=True)
    row["consensus"] = json.dumps(consensus, sort_keys=True)
    row["tools"] = _tools(row["world"])
    row["split"] = split
    tally.add(row, verdicts, consensus)
    return row


class _PartWriter:
    """Rows into `part-NNNNN.parquet` files of at most `rows_per_part` rows each; an empty
    taskset still gets one (empty) part, so every version has the same layout."""

    def __init__(self, folder: Path, rows_per_part: int) -> None:
        self.folder = folder
        self.rows_per_part = rows_per_part
        self.names: list[str] = []
        self._writer: pq.ParquetWriter | None = None
        self._rows_in_part = 0

    def __enter__(self) -> _PartWriter:
        return self

    def write(self, table: pa.Table) -> None:
        while table.num_rows:
            if self._writer is None:
                self._open()
            room = self.rows_per_part - self._rows_in_part
            self._writer.write_table(table.slice(0, room))
            self._rows_in_part += min(room, table.num_rows)
            table = table.slice(room)
            if self._rows_in_part == self.rows_per_part:
                self._close()

    def __exit__(self, *exc_info: object) -> None:
        if not self.names and exc_info[0] is None:
            self._open()
        self._close()

    def _open(self) -> None:
        self.names.append(f"part-{len(self.names):05d}.parquet")
        self._writer = pq.ParquetWriter(self.folder / self.names[-1], TASKSET_SCHEMA)
        self._rows_in_part = 0

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class _Fingerprint:
    """The first 16 hex digits of the sha256 of `json.dumps([rows, band], sort_keys=True,
    default=str)`, fed one row at a time: the same text, never held whole."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256(b"[[")
        self._rows = 0

    def add(self, row: dict[str, Any]) -> None:
        if self._rows:
            self._hash.update(b", ")
        self._hash.update(json.dumps(row, sort_keys=True, default=str).encode("utf-8"))
        self._rows += 1

    def hexdigest(self, band: tuple[float, float] | None) -> str:
        tail = "], " + json.dumps(band, sort_keys=True, default=str) + "]"
        self._hash.update(tail.encode("utf-8"))
        return self._hash.hexdigest()[:16]


def _tools(world: str | None) -> str | None:
    """A tool-use task's tools in the OpenAI tools format (JSON), from its world."""
    setup = json.loads(world) if world else None
    return json.dumps(WorldSetup.model_validate(setup).tools, sort_keys=True) if setup else None


def _latest_version(root: Path) -> Path | None:
    versions = sorted(p for p in root.glob("v[0-9][0-9][0-9][0-9]") if p.is_dir())
    return versions[-1] if versions else None


def taskset_version(path: Path) -> Path:
    """The version folder `path` names: a version itself, or a taskset's `latest`."""
    if (path / "manifest.json").is_file():
        return path
    if (path / "latest" / "manifest.json").is_file():
        return (path / "latest").resolve()
    raise FileNotFoundError(f"{path} is neither a taskset version nor a taskset with `latest`")


def _version_number(path: Path) -> int:
    return int(re.sub(r"\D", "", path.name))


def search_turns(version: Path) -> int | None:
    """The doc-search harness's turn limit taskset `version` was calibrated with, as its
    manifest records it with the corpus (None: not recorded)."""
    recorded = (_manifest(version).get("corpus") or {}).get("max_turns")
    return int(recorded) if recorded else None


def _manifest(version_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((version_dir / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _point_latest(root: Path, version: str) -> None:
    link = root / "latest"
    tmp = root / f".latest.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(version)
    os.replace(tmp, link)


HISTOGRAM_BINS = 10
BANDS = ("too_easy", "in_band", "too_hard")


@dataclass
class _Tally:
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
    # per judge check: the panel decisions the taskset carries and the sum of their agreement
    decisions: Counter[str] = field(default_factory=Counter)
    agreement_sum: dict[str, float] = field(default_factory=dict)
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
            self.agreement_sum[check] = self.agreement_sum.get(check, 0) + decision["agreement"]
        self.hackable += bool(row["hackable"])
        self.repaired += lineage.get("repair") is not None
        if lineage["model"]:
            self.generators.add(lineage["model"])
        self.judges.update(v["judge_model"] for v in verdicts)
        self.solvers.add(row["solver_model"])

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
            "judge_agreement": {
                check: {
                    "decisions": count,
                    "mean_agreement": round(self.agreement_sum[check] / count, 3),
                }
                for check, count in sorted(self.decisions.items())
            },
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


def _dataset_card(manifest: dict[str, Any]) -> str:
    bands = ", ".join(f"{k}: {v}" for k, v in manifest["by_band"].items())
    levels = ", ".join(f"{k}: {v}" for k, v in manifest["by_level"].items()) or "-"
    models = manifest["models"]
    kinds = ", ".join(f"{k}: {v}" for k, v in manifest["by_kind"].items()) or "-"
    harnesses = ", ".join(f"{k}: {v}" for k, v in manifest["by_harness"].items()) or "-"
    split = manifest["split"]
    withheld = sum(split["withheld"].values())
    agreement = (
        "\n".join(
            f"- {check}: {v['decisions']} panel decisions, mean agreement {v['mean_agreement']}"
            for check, v in manifest["judge_agreement"].items()
        )
        or "- no judged checks"
    )
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

## Judge agreement

{agreement}

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
