"""Curation by people (`foundry curate`): decisions in a real browser, then what the next run
and export make of them."""

from __future__ import annotations

import json
import shutil
import threading
import warnings

import pytest

from data.export import export_taskset, read_tasks
from data.lake import (
    DecisionError,
    QueueFilter,
    RubricSpec,
    decide,
    edited_task,
    queue,
    task_record,
)
from data.review import CurationServer, diff_versions
from families import export_kinds
from flows.cli import main
from sources import groupings
from sources.documents import ingest_docs
from tests.conftest import SAMPLE_DOCS, endpoints_for, make_context, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle

CHROMIUM = shutil.which("chromium")


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    """A doc-QA run on three sample documents with the oracle as every model, exported once:
    (context, the oracle's server, the first version)."""
    root = tmp_path_factory.mktemp("curation")
    ctx = make_context(root / "home", generate={"max_chunks": 6}, calibrate={"k": 4})
    ingest_docs([str(d) for d in sorted(SAMPLE_DOCS.glob("*.md"))[:3]], ctx)
    with FakeOpenAIServer(Oracle()) as server:
        run_llm_stages(ctx, endpoints_for(server))
        first = export(ctx)
        yield ctx, server, first


def export(ctx, **options):
    return export_taskset(
        ctx.lake,
        "docqa",
        ctx.config.home / "tasksets",
        kinds=export_kinds(),
        groupings=groupings(),
        **options,
    ).path


@pytest.fixture
def served(sample_run):
    ctx, _, _ = sample_run
    server = CurationServer(ctx.lake, "ana")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def browser():
    """Playwright, to drive Debian's Chromium. Without Chromium the test skips, and says so in
    the run's warnings summary too (`pytest -q`, as `make test` runs it, lists no skip's
    reason): where `make browser` could not install it, the page goes untested."""
    if CHROMIUM is None:
        reason = "chromium is not on PATH: `make browser` installs it from Debian packages"
        warnings.warn(f"the curation page's browser test is skipped: {reason}", stacklevel=2)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    return sync_playwright()


def test_a_reviewer_rejects_edits_and_accepts_in_the_browser_and_the_next_run_follows(
    sample_run, served, capsys
):
    ctx, server, first = sample_run
    exported = {r["task_id"]: r for r in read_tasks(first).to_pylist()}
    rejected, edited, accepted = sorted(exported)[:3]
    instruction = "In one or two words: " + task_record(ctx.lake, edited)["instruction"]

    with browser() as pw:
        chrome = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = chrome.new_page()
        page.goto(served.url)
        page.wait_for_selector("#queue li")

        page.click(f'#queue li[data-task="{rejected}"]')
        page.wait_for_selector(f"#task-id:has-text('{rejected}')")
        page.keyboard.press("r")
        page.select_option("#reject-reason", "wrong_answer")
        page.fill("#reject-note", "the passage gives another year")
        page.click("#reject-submit")
        page.wait_for_selector(f"#message:has-text('reject {rejected}')")

        page.click(f'#queue li[data-task="{edited}"]')
        page.wait_for_selector(f"#task-id:has-text('{edited}')")
        page.keyboard.press("e")
        page.fill("#edit-instruction", instruction)
        page.keyboard.press("Control+Enter")
        page.wait_for_selector("#message:has-text('waits for verification')")

        page.click(f'#queue li[data-task="{accepted}"]')
        page.wait_for_selector(f"#task-id:has-text('{accepted}')")
        page.keyboard.press("a")
        page.wait_for_selector(f"#message:has-text('accept {accepted}')")
        page.select_option("#f-state", "rejected")
        page.wait_for_function("document.querySelectorAll('#queue li').length === 1")
        assert page.inner_text("#queue li").startswith("rejected")
        chrome.close()

    decisions = {d["task_id"]: d for d in ctx.lake.rows("SELECT * FROM decisions")}
    assert {t: d["decision"] for t, d in decisions.items()} == {
        rejected: "reject",
        edited: "edit",
        accepted: "accept",
    }
    assert (
        decisions[rejected]["reason"] == "wrong_answer" and decisions[rejected]["reviewer"] == "ana"
    )
    assert json.loads(decisions[edited]["edits"]) == {"instruction": instruction}
    made = decisions[edited]["edited_task_id"]

    # the next run: the edit is verified and calibrated (the oracle knows its question), the
    # rejection is replaced by a task from the same source that names it
    server.responder.answers[instruction] = exported[edited]["answer"]
    run_llm_stages(ctx, endpoints_for(server))
    assert made in ctx.lake.finished_items("verify") & ctx.lake.finished_items("calibrate")
    revised = {
        r["reason"]: r["detail"]
        for r in ctx.lake.rows("SELECT reason, detail FROM status WHERE stage = 'revise'")
    }
    assert set(revised) == {"edited", "replaced"} and revised["edited"] == made
    replacement = revised["replaced"].split(": ")[1]
    lineage = json.loads(
        ctx.lake.rows("SELECT lineage FROM tasks WHERE task_id = ?", [replacement])[0]["lineage"]
    )
    assert lineage["review"] | {"decision_id": ""} == {
        "action": "rejected",
        "task_id": rejected,
        "decision_id": "",
        "reviewer": "ana",
        "reason": "wrong_answer",
        "note": "the passage gives another year",
    }
    rubric = ctx.lake.rows("SELECT item, category FROM rubrics WHERE task_id = ?", [rejected])
    assert {
        "item": "not wrong_answer: the reference answer is wrong (the passage gives another year)",
        "category": "reviewer:wrong_answer",
    } in rubric

    second = export(ctx)
    rows = {r["task_id"]: r for r in read_tasks(second).to_pylist()}
    assert rejected not in rows and edited not in rows
    assert rows[made]["prompt"][-1]["content"] == instruction
    manifest = json.loads((second / "manifest.json").read_text())
    assert manifest["review"]["left_out"] == {"rejected": 1, "edited": 1}
    assert manifest["review"]["exported"]["accepted"] == 2  # the accepted task and the edit
    diff = diff_versions(first, second)
    assert rejected in {c.before["task_id"] for c in diff.removed}
    assert {c.after["task_id"]: c.fields for c in diff.changed}[made] == ("instruction",)

    assert main(["diff", "--home", str(ctx.config.home), "--json"]) == 0  # the two versions
    decided = json.loads(capsys.readouterr().out)["decisions"]
    assert decided[rejected]["reason"] == "wrong_answer" and decided[edited]["decision"] == "edit"
    assert main(["diff", "--home", str(ctx.config.home)]) == 0
    assert "[review: reject, wrong_answer]" in capsys.readouterr().out

    only_accepted = export(ctx, review_required=True)
    kept = read_tasks(only_accepted).column("task_id").to_pylist()
    assert sorted(kept) == sorted([accepted, made])


def test_the_queue_pages_and_filters(sample_run):
    ctx, _, _ = sample_run
    everything = queue(ctx.lake, QueueFilter(), 0, 1000)
    assert everything["total"] == len(everything["tasks"]) > 3
    total = everything["total"]
    pages = [queue(ctx.lake, QueueFilter(), offset, 3)["tasks"] for offset in range(0, total, 3)]
    paged = [t["task_id"] for page in pages for t in page]
    assert paged == [t["task_id"] for t in everything["tasks"]]
    assert everything["bands"]
    for band in everything["bands"]:
        banded = queue(ctx.lake, QueueFilter(band=band), 0, 1000)["tasks"]
        assert banded and {t["band"] for t in banded} == {band}
    assert queue(ctx.lake, QueueFilter(agreement="unjudged"), 0, 10)["total"] == 0  # all judged
    unreviewed = queue(ctx.lake, QueueFilter(state="unreviewed"), 0, 1000)["tasks"]
    # exactly the queue's unreviewed tasks, and some (a filter finding none would pass a subset)
    expected = [t["task_id"] for t in everything["tasks"] if t["state"] == "unreviewed"]
    assert expected and sorted(t["task_id"] for t in unreviewed) == sorted(expected)


def test_a_bad_decision_is_refused_and_records_nothing(sample_run):
    ctx, _, _ = sample_run
    task_id = queue(ctx.lake, QueueFilter(), 0, 1)["tasks"][0]["task_id"]
    before = ctx.lake.rows("SELECT count(*) AS n FROM decisions")[0]["n"]
    for decision, options in (
        ("reject", {}),  # no reason
        ("reject", {"reason": "boring"}),
        ("maybe", {}),
        ("edit", {"edits": {}}),  # changes nothing
        ("edit", {"edits": {"answer": "  "}}),
        ("edit", {"edits": {"verifier": "x"}}),
        ("edit", {"edits": {"rubric_items": ["x"]}}),  # a doc-QA verifier has none
    ):
        with pytest.raises(DecisionError):
            decide(ctx.lake, task_id, decision, "ana", **options)
    with pytest.raises(DecisionError):
        decide(ctx.lake, task_id, "accept", " ")
    with pytest.raises(DecisionError):
        decide(ctx.lake, "no-such-task", "accept", "ana")
    assert ctx.lake.rows("SELECT count(*) AS n FROM decisions")[0]["n"] == before


def test_the_server_answers_only_its_own_name_and_json(served):
    import httpx

    assert httpx.get(served.url + "api/queue").status_code == 200
    assert httpx.get(served.url, headers={"Host": "evil.example"}).status_code == 421
    form = httpx.post(served.url + "api/decisions", data={"task_id": "x", "decision": "accept"})
    assert form.status_code == 415
    missing = httpx.post(served.url + "api/decisions", json={"decision": "accept"})
    assert missing.status_code == 400 and "malformed" in missing.json()["error"]
    unknown = httpx.post(served.url + "api/decisions", json={"task_id": "x", "decision": "accept"})
    assert unknown.status_code == 422 and "no task" in unknown.json()["error"]
    assert httpx.get(served.url + "api/task/nothing").status_code == 404


def test_an_edit_of_rubric_items_makes_a_task_that_names_its_original(sample_run):
    ctx, _, _ = sample_run
    task = ctx.lake.records("tasks")[0]
    graded = task.model_copy(update={"verifier": RubricSpec(rubric=["names 1887"], by_item=True)})
    edited = edited_task(
        graded, {"rubric_items": [" names 1887 ", "", "says Ordell"]}, "d1", "ana", ""
    )
    assert edited.verifier.rubric == ["names 1887", "says Ordell"] and edited.verifier.by_item
    assert edited.task_id != graded.task_id and edited.prompt == graded.prompt
    assert edited.lineage.review.model_dump() == {
        "action": "edited",
        "task_id": graded.task_id,
        "decision_id": "d1",
        "reviewer": "ana",
        "reason": "",
        "note": "",
    }
