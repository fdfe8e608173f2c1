"""`foundry report`: the static HTML page on the lake and a taskset version, its plots rendered
by headless Chromium (installed from Debian packages by `make test`)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from plotly.offline import get_plotlyjs

from data.export import canonical_rows
from data.lake import Lake
from data.review import render_report, write_report
from flows.cli import main
from tests.exported_files import rewrite_tasks

SECTIONS = [
    "funnel",
    "difficulty",
    "changes",
    "agreement",
    "gates",
    "cost",
    "evaluation",
    "loop",
    "samples",
]
PLOTS = ("plot-funnel", "plot-difficulty", "plot-agreement", "plot-cost")
VOID = {"meta", "br", "img", "input", "link", "hr", "col", "wbr"}


class _Page(HTMLParser):
    """Elements of an HTML page: section ids, plot divs that hold a rendered plotly SVG, and
    end tags that close no open element (the page is malformed)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.sections: list[str] = []
        self.rendered: set[str] = set()
        self.mismatched: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attributes = {k: v or "" for k, v in attrs}
        if tag == "section":
            self.sections.append(attributes.get("id", ""))
        if tag == "svg" and "main-svg" in attributes.get("class", "").split():
            self.rendered.update(
                a.get("id", "") for _, a in self.stack if "js-plotly-plot" in a.get("class", "")
            )
        if tag not in VOID:
            self.stack.append((tag, attributes))

    def handle_endtag(self, tag):
        if self.stack and self.stack[-1][0] == tag:
            self.stack.pop()
        else:
            self.mismatched.append(tag)


def _section(page: str, name: str) -> str:
    return re.search(rf'<section id="{name}">(.*?)</section>', page, re.S).group(1)


def test_the_report_shows_every_section_and_plot(docqa_taskset):
    ctx, version, _ = docqa_taskset
    manifest = json.loads((version / "manifest.json").read_text())
    report = render_report(ctx.lake, version)
    page = _Page(report.html)
    assert report.html.startswith("<!DOCTYPE html>") and not page.mismatched and not page.stack
    assert page.sections == SECTIONS
    assert report.plots == PLOTS and report.n_tasks == manifest["n_tasks"] > 0
    for plot in PLOTS:
        assert report.html.count(f'id="{plot}"') == 1
    # plotly.js is in the page once, loaded from nowhere else
    assert report.html.count(get_plotlyjs()) == 1 and "<script src" not in report.html
    empty = re.findall(r'<section id="(\w+)">\s*<h2>[^<]*</h2>\s*<p class="empty">', report.html)
    # the rest have content: one version, no code task, nothing evaluated, no loop
    assert empty == ["changes", "gates", "evaluation", "loop"]
    for kind, n in manifest["by_kind"].items():
        samples = re.search(rf'data-kind="{kind}">(.*?)</div>', report.html, re.S).group(1)
        assert samples.count("<tr>") - 1 == min(3, n)  # rows under the header
        assert len({band for band in manifest["by_band"] if f"<td>{band}</td>" in samples}) == 3
    reasons = _section(report.html, "funnel")
    for stage, counts in manifest["funnel"]["stages"].items():
        if counts["items"]:
            assert f"<td>{stage}</td>" in reasons


def test_task_text_is_escaped(docqa_taskset, tmp_path):
    _, version, _ = docqa_taskset
    copy = shutil.copytree(version, tmp_path / version.name)
    rows = canonical_rows(copy)
    for row in rows:
        row["prompt"] = [{"role": "user", "content": '<script>alert("q")</script> & more'}]
        row["answer"] = "<img src=x onerror=alert(1)>"
    rewrite_tasks(copy, rows)
    report = render_report(Lake(tmp_path / "home"), copy)
    assert '<script>alert("q")</script>' not in report.html
    assert "<img src=x" not in report.html
    samples = _section(report.html, "samples")
    assert samples.count("&lt;script&gt;alert(&quot;q&quot;)&lt;/script&gt; &amp; more") == 3
    assert samples.count("&lt;img src=x onerror=alert(1)&gt;") == 3


def test_an_empty_lake_says_so_without_plots(tmp_path):
    report = render_report(Lake(tmp_path / "home"), None)
    page = _Page(report.html)
    assert not page.mismatched and not page.stack and page.sections == SECTIONS
    assert report.plots == () and report.n_tasks == 0
    assert "<script" not in report.html and "plotly-graph-div" not in report.html
    for name in SECTIONS:
        assert 'class="empty"' in _section(report.html, name)
    assert "no exported taskset" in report.html


def test_headless_chromium_renders_every_plot(docqa_taskset, tmp_path):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not on PATH: `make browser` installs it from Debian packages")
    ctx, version, _ = docqa_taskset
    report = render_report(ctx.lake, version)
    out = write_report(report, tmp_path / "report.html")
    result = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            out.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Uncaught" not in result.stderr  # e.g. "ReferenceError: Plotly is not defined"
    assert _Page(result.stdout).rendered == set(PLOTS)


def test_foundry_report_writes_the_page(docqa_taskset, tmp_path, capsys):
    ctx, version, _ = docqa_taskset
    # a home whose lake is the fixture's and whose taskset is its export: the default version
    home = tmp_path / "home"
    (home / "tasksets").mkdir(parents=True)
    (home / "lake").symlink_to(ctx.config.home / "lake")
    (home / "tasksets" / "docqa").symlink_to(version.parent)
    out = tmp_path / "site" / "report.html"
    assert main(["report", "--out", str(out), "--home", str(home)]) == 0
    printed = capsys.readouterr().out
    assert f"report: {out}" in printed and str(version.resolve()) in printed
    assert "plots: funnel, difficulty, agreement, cost" in printed
    assert 'id="plot-agreement"' in out.read_text() and not list(out.parent.glob("*.tmp"))

    empty = tmp_path / "empty.html"
    assert main(["report", "--out", str(empty), "--home", str(tmp_path / "none")]) == 0
    assert "no exported taskset; plots: none" in capsys.readouterr().out
    missing = ["--taskset", str(tmp_path / "missing"), "--home", str(tmp_path / "none")]
    assert main(["report", "--out", str(empty), *missing]) == 2
    assert "neither a taskset version" in capsys.readouterr().err
