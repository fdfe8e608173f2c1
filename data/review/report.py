"""`foundry report`: one static HTML page on the lake and a taskset version.

The funnel, the difficulty histogram, pass rate against judge agreement, LLM tokens and cost per
role, and a sample of tasks per kind. plotly.js is embedded once in the page (no CDN), so the
file opens offline; every plot is a `div` with a stable id (`plot-funnel`, ...).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from data.config import FoundryConfig
from data.costs import Cost
from data.export import canonical_rows, judge_text, last_user_message
from data.html_page import STYLE, empty_note, escaped, section
from data.html_page import table as html_table
from data.lake import (
    Lake,
    breakdown_html,
    evaluation_rows,
    funnel,
    gate_rows,
    latest_controls,
    loop_rows,
    utcnow,
)
from data.review.diagnosis import Diagnosis, diagnose
from data.review.version_diff import changes_html

SAMPLES_PER_KIND = 3
TEXT_LIMIT = 500  # characters of a sample's question or answer shown
BANDS = ("too_easy", "in_band", "too_hard")
OUTCOME_COLOURS = {"done": "#4c956c", "rejected": "#e09f3e", "failed": "#c0392b"}
PLOT_CONFIG = {"displaylogo": False, "responsive": True}


@dataclass(frozen=True)
class Report:
    html: str
    version: Path | None  # the taskset version shown, None when there is none
    n_tasks: int
    plots: tuple[str, ...]  # ids of the plot divs drawn, e.g. "plot-funnel"


class _Plots:
    """The page's plot divs, written without plotly.js (the page embeds it once)."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def div(self, fig: go.Figure, name: str, height: int = 420) -> str:
        plot_id = f"plot-{name}"
        self.ids.append(plot_id)
        fig.update_layout(
            template="plotly_white", height=height, margin={"l": 70, "r": 30, "t": 40, "b": 60}
        )
        return pio.to_html(
            fig,
            full_html=False,
            include_plotlyjs=False,
            div_id=plot_id,
            default_height=f"{height}px",
            config=PLOT_CONFIG,
        )


def render_report(
    lake: Lake,
    version: Path | None,
    config: FoundryConfig | None = None,
    samples_per_kind: int = SAMPLES_PER_KIND,
    made_by: dict[str, tuple[str, ...]] | None = None,
) -> Report:
    """The report page on `lake` and the taskset `version` folder (None: the lake's sections
    only, the taskset's say that there is none); with the run's `config` and `made_by`
    (`families.stage_kinds()`), a thin taskset's explanation (`data.review.diagnosis`) follows."""
    if config is not None and made_by is None:
        raise TypeError("a config's diagnosis needs made_by (families.stage_kinds())")
    summary = funnel(lake)
    manifest = json.loads((version / "manifest.json").read_text()) if version else None
    tasks = canonical_rows(version) if version else []
    plots = _Plots()
    exported = manifest["n_tasks"] if manifest else 0
    thin = diagnose(lake, config, summary["stages"], exported, made_by) if config else None
    breakdown = breakdown_html(manifest.get("cost") if manifest else None)
    sections = [
        section("funnel", "Funnel", _funnel(summary, plots)),
        section("thin", "Why so few tasks", _explanation(thin)) if thin else "",
        section("difficulty", "Difficulty", _difficulty(manifest, plots)),
        section("changes", "Changes since the previous version", changes_html(lake, version)),
        section(
            "agreement",
            "Pass rate and judge agreement",
            _agreement(manifest, tasks, plots) + _controls(lake),
        ),
        section("gates", "Code admission gates", _gates(gate_rows(lake))),
        section("cost", "Cost", _cost(summary, plots) + breakdown),
        section("evaluation", "Held-out evaluation", _evaluations(evaluation_rows(lake))),
        section("loop", "Loop rounds", _loop_rounds(loop_rows(lake))),
        section("samples", "Sample tasks", _samples(manifest, tasks, samples_per_kind)),
    ]
    title = f"{manifest['name']} {manifest['version']}" if manifest else "no taskset"
    plotly_js = f"<script>{get_plotlyjs()}</script>" if plots.ids else ""
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>taskfoundry report: {escaped(title)}</title>
<style>{STYLE}</style>
{plotly_js}
</head>
<body>
<h1>taskfoundry report</h1>
{_header(lake, version, manifest)}
{"".join(sections)}
</body>
</html>
"""
    return Report(page, version, len(tasks), tuple(plots.ids))


def write_report(report: Report, out: Path) -> Path:
    """Write the page to `out` atomically (a temporary file renamed into place)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.tmp")
    tmp.write_text(report.html, encoding="utf-8")
    os.replace(tmp, out)
    return out


def _explanation(thin: Diagnosis) -> str:
    head, *rest = thin.lines()
    return f"<p>{escaped(head)}</p>\n<pre>{escaped(chr(10).join(rest))}</pre>"


def _header(lake: Lake, version: Path | None, manifest: dict[str, Any] | None) -> str:
    lines = [f"generated {utcnow():%Y-%m-%d %H:%M} UTC from the lake at {lake.root}"]
    if manifest and version:
        kinds = ", ".join(f"{k} {n}" for k, n in manifest["by_kind"].items()) or "none"
        bands = ", ".join(f"{b} {manifest['by_band'][b]}" for b in BANDS)
        lines.append(
            f"taskset {manifest['name']} {manifest['version']} ({version}), exported"
            f" {manifest['created_at'][:16].replace('T', ' ')}: {manifest['n_tasks']} tasks;"
            f" by kind: {kinds}; by band: {bands}"
        )
    else:
        lines.append("no exported taskset: `foundry export` writes one")
    return "".join(f'<p class="meta">{escaped(line)}</p>' for line in lines)


def _funnel(summary: dict[str, Any], plots: _Plots) -> str:
    stages = {name: s for name, s in summary["stages"].items() if s["items"]}
    if not stages:
        return empty_note(
            "The lake holds no items yet: `foundry run` or `foundry ingest` adds some."
        )
    fig = go.Figure(
        [
            go.Bar(
                name=outcome,
                x=list(stages),
                y=[s[outcome] for s in stages.values()],
                marker_color=colour,
            )
            for outcome, colour in OUTCOME_COLOURS.items()
        ]
    )
    fig.update_layout(
        barmode="stack", xaxis_title="stage", yaxis_title="items", legend_title="outcome"
    )
    reasons = [
        [stage, *reason.split(":", 1), n]
        for stage, s in stages.items()
        for reason, n in sorted(s["reasons"].items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    table = html_table(["stage", "outcome", "reason", "items"], reasons, ["", "", "", "num"])
    return plots.div(fig, "funnel") + "<h3>Outcomes by reason</h3>" + table


def _difficulty(manifest: dict[str, Any] | None, plots: _Plots) -> str:
    if not manifest:
        return empty_note("No exported taskset, so no measured difficulty.")
    if not manifest["n_tasks"]:
        return empty_note("The taskset holds no tasks.")
    counts = manifest["difficulty_histogram"]
    bins = [f"{i / len(counts):.1f}–{(i + 1) / len(counts):.1f}" for i in range(len(counts))]
    fig = go.Figure(go.Bar(x=bins, y=counts, marker_color="#3d6fb6"))
    fig.update_layout(xaxis_title="solver pass rate", yaxis_title="tasks", bargap=0.05)
    bands = html_table(["band", "tasks"], [[b, manifest["by_band"][b]] for b in BANDS], ["", "num"])
    return plots.div(fig, "difficulty") + bands


def _controls(lake: Lake) -> str:
    rows = latest_controls(lake)
    if not rows:
        return ""
    table = [
        [
            r["role"],
            r["model"],
            f"{r['correct']} of {r['items']}",
            f"{r['accuracy']:.0%}",
            "yes" if r["competent"] else f"no (below {r['threshold']:.0%}): a stronger model",
        ]
        for r in rows
    ]
    note = (
        "<p>Before verifying, each judge answered control items made from the run's own chunks:"
        " fill-in-the-blank questions the passage shown answers, right answers to accept and"
        " wrong ones to reject; a judge below the bar on any kind decides no check: it does"
        " not vote where another judge passed, and where none did the checks are held"
        " (held_judge_below_controls), but for the leak gate of a question its source answers"
        " by construction, which can only reject.</p>"
    )
    header = ["judge", "model", "control items right", "accuracy", "able to judge"]
    return note + html_table(header, table, ["", "", "num", "num", ""])


def _gates(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return empty_note("No code task was verified: no admission gate was taken.")
    table = [
        [
            r["gate"],
            r["passed"],
            r["failed"],
            r["not_run"],
            r["flaky"] if r["gate"] == "fresh_runs" else "",
            f"{r['mean_share']:.0%}" if r["mean_share"] is not None else "",
        ]
        for r in rows
    ]
    note = (
        "<p>Each code task is admitted only past every gate, in this order: a usable reference"
        " that passes 3 fresh runs, an outside check, the empty and a do-nothing attempt scoring"
        " 0, tests that kill at least one mutant of the reference, and the red team's admission"
        " attacks scoring 0 (docs/reward-integrity.md). A gate that could not run for a task"
        " (no mutant to try) is not passed: it keeps the task out.</p>"
    )
    header = ["gate", "tasks passed", "kept out", "not run (kept out)", "flaky", "mean share"]
    return note + html_table(header, table, ["", "num", "num", "num", "num", "num"])


def _agreement(manifest: dict[str, Any] | None, tasks: list[dict[str, Any]], plots: _Plots) -> str:
    if not manifest:
        return empty_note("No exported taskset, so no judged tasks.")
    points: Counter[tuple[str, float, float]] = Counter()
    unjudged = lone = 0
    for task in tasks:
        decisions = json.loads(task["consensus"])
        agreement = [float(c["agreement"]) for c in decisions if c["agreement"] is not None]
        if agreement:
            mean = round(sum(agreement) / len(agreement), 3)
            points[(task["kind"], mean, task["pass_rate"])] += 1
        elif decisions:
            lone += 1
        else:
            unjudged += 1
    checks = html_table(
        ["check", "panel decisions", "judges", "mean agreement"],
        [
            [c, v["decisions"], "; ".join(map(judge_text, v["judges"])), _agreement_text(v)]
            for c, v in manifest["judge_agreement"].items()
        ],
        ["", "num", "", "num"],
    )
    if not points and not lone:
        return empty_note("No task in the taskset carries judge panel decisions.")
    if not points:
        return (
            empty_note(
                f"No task has an agreement figure: at most one judge voted on each check of the"
                f" {lone} judged tasks."
            )
            + checks
        )
    by_kind: dict[str, list[tuple[float, float, int]]] = {}
    for (kind, x, y), n in sorted(points.items()):
        by_kind.setdefault(kind, []).append((x, y, n))
    largest = max(points.values())
    fig = go.Figure()
    for kind, mine in by_kind.items():
        xs, ys, counts = zip(*mine, strict=True)
        fig.add_trace(
            go.Scatter(
                name=kind,
                x=xs,
                y=ys,
                customdata=counts,
                mode="markers",
                marker={
                    "size": counts,
                    "sizemode": "area",
                    "sizeref": 2 * largest / 40**2,
                    "sizemin": 6,
                    "opacity": 0.7,
                    "line": {"width": 1, "color": "white"},
                },
                hovertemplate="agreement %{x:.2f}<br>pass rate %{y:.2f}<br>%{customdata} tasks",
            )
        )
    fig.update_layout(
        xaxis={"title": "judge agreement (mean over the task's checks)", "range": [-0.05, 1.05]},
        yaxis={"title": "solver pass rate", "range": [-0.05, 1.05]},
        legend={"title": "kind", "itemsizing": "constant"},
        showlegend=True,  # also for a single kind
    )
    note = (
        "Each marker is the tasks of one kind at one (agreement, pass rate); its area grows with"
        " their number. Agreement is the share of the judges that voted siding with the panel's"
        " decision, counted only where more than one judge voted."
    )
    if unjudged:
        note += f" {unjudged} tasks without judged checks (e.g. code tasks) are not shown."
    if lone:
        note += f" {lone} tasks whose every check had at most one vote are not shown."
    return plots.div(fig, "agreement") + f'<p class="note">{escaped(note)}</p>' + checks


def _agreement_text(check: dict[str, Any]) -> str:
    """A check's mean agreement over its decisions with several votes, or why it has none."""
    if check["mean_agreement"] is None:
        return "- (no decision had more than one vote)"
    return f"{check['mean_agreement']} over {check['decisions_with_several_votes']}"


def _cost(summary: dict[str, Any], plots: _Plots) -> str:
    usage = summary["llm"]
    if not usage:
        return empty_note("No LLM calls recorded.")
    roles = list(usage)
    priced = any(u["cost_usd_at_least"] for u in usage.values())
    fig = make_subplots(
        rows=1,
        cols=2 if priced else 1,
        subplot_titles=["live tokens", "cost (USD)"] if priced else None,
    )
    for part, colour in (("prompt_tokens", "#3d6fb6"), ("completion_tokens", "#9bbbe0")):
        tokens = [usage[r][part] for r in roles]
        fig.add_trace(go.Bar(name=part.replace("_", " "), x=roles, y=tokens, marker_color=colour))
    if priced:
        costs = [usage[r]["cost_usd_at_least"] for r in roles]
        fig.add_trace(
            go.Bar(name="cost", x=roles, y=costs, marker_color="#4c956c", showlegend=False),
            row=1,
            col=2,
        )
    fig.update_layout(barmode="stack", legend_title="tokens")
    fig.update_xaxes(title_text="role")
    fig.update_yaxes(title_text="tokens", col=1)
    rows = [
        [
            r,
            u["calls"],
            u["cache_hits"],
            u["errors"],
            u["prompt_tokens"],
            u["completion_tokens"],
            Cost.from_json(u).text(),
        ]
        for r, u in usage.items()
    ]
    table = html_table(
        ["role", "live calls", "cache hits", "errors", "prompt tokens", "completion tokens", "USD"],
        rows,
        ["", "num", "num", "num", "num", "num", "num"],
    )
    cost = summary["cost"]
    spent = Cost.from_json(cost)
    line = f"All runs: {spent.text()}, {cost['tokens']:,} live tokens"
    if cost["accepted_tasks"]:
        line += (
            f"; per task accepted by verification ({cost['accepted_tasks']}):"
            f" {spent.scaled(1 / cost['accepted_tasks']).text()},"
            f" {cost['tokens_per_accepted_task']:,} tokens"
        )
    if not spent.known:
        line += ". The cost plotted is the part at known prices only."
    elif not priced:
        line += ". Every model called is priced at 0 (local, or so configured): tokens only."
    return plots.div(fig, "cost") + f'<p class="note">{escaped(line)}</p>' + table


def _evaluations(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return empty_note("no policy evaluated yet: `foundry evaluate TASKSET --policy ...`")
    header = ["taskset", "split", "policy", "tasks", "k", "pass rate", "interval", "not evaluated"]
    table = [
        [
            r["taskset"],
            r["split"],
            r["policy"],
            r["tasks"],
            r["k"],
            f"{r['pass_rate']:.3f}",
            f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
            r["missing"],
        ]
        for r in rows
    ]
    note = (
        "<p>Each policy attempted every task of the split k times in the task's own environment,"
        " graded by its family's verifier; the interval is Wilson's over the attempts.</p>"
    )
    return note + html_table(header, table, ["", "", "", "num", "num", "num", "", "num"])


def _loop_rounds(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return empty_note("no loop has run yet: `foundry loop`")

    def rate(value: float | None, interval: list[float], sign: str = "") -> str:
        if value is None:
            return "-"
        spread = f" [{interval[0]:{sign}.3f}, {interval[1]:{sign}.3f}]" if interval else ""
        return f"{value:{sign}.3f}{spread}"

    header = ["loop", "round", "taskset", "train / eval", "policy", "pass rate", "trained"]
    header += ["pass rate after", "change", "targets made", "rollouts ingested"]
    table = [
        [
            r["loop"],
            r["round"],
            r["taskset"],
            f"{r['train_tasks']} / {r['eval_tasks']}",
            r["policy"],
            rate(r["before"], r["before_ci"]),
            r["trained"],
            rate(r["after"], r["after_ci"]),
            rate(r["difference"], r["difference_ci"], "+"),
            sum(r["targets"].values()),
            r["episodes"],
        ]
        for r in rows
    ]
    note = (
        "<p>Each round exports a version measured against its policy, trains it, and evaluates"
        " both policies on the version's eval split (k attempts per task; Wilson intervals, the"
        " change's a bootstrap over tasks). The new policy's failures on train tasks become the"
        " next round's targeted tasks.</p>"
    )
    align = ["", "num", "", "", "", "num", "", "num", "num", "num", "num"]
    return note + html_table(header, table, align)


def _samples(manifest: dict[str, Any] | None, tasks: list[dict[str, Any]], n: int) -> str:
    if not manifest:
        return empty_note("No exported taskset, so no tasks to show.")
    if not tasks:
        return empty_note("The taskset holds no tasks.")
    kinds = sorted({task["kind"] for task in tasks})
    parts = []
    for kind in kinds:
        mine = _sample([t for t in tasks if t["kind"] == kind], n)
        rows = [
            [
                t["task_id"][:12],
                _clip(last_user_message(t["prompt"])),
                _clip(t["answer"]),
                f"{t['pass_rate']:.2f} (n={t['pass_n']})",
                t["band"],
            ]
            for t in mine
        ]
        total = sum(t["kind"] == kind for t in tasks)
        table = html_table(
            ["task", "question", "answer", "pass rate", "band"],
            rows,
            ["", "text", "text", "num", ""],
        )
        parts.append(
            f'<div class="samples" data-kind="{escaped(kind)}"><h3>{escaped(kind)}</h3>'
            f'<p class="note">{len(mine)} of {total} tasks</p>{table}</div>'
        )
    return "\n".join(parts)


def _sample(tasks: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """`n` tasks taking the bands in turn (first by task id within each band), so a sample
    shows the range of difficulty."""
    seen: Counter[str] = Counter()
    ranked = []
    for task in sorted(tasks, key=lambda t: t["task_id"]):
        ranked.append((seen[task["band"]], BANDS.index(task["band"]), task["task_id"], task))
        seen[task["band"]] += 1
    return [task for *_, task in sorted(ranked, key=lambda r: r[:3])[:n]]


def _clip(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"
