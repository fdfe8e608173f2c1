"""The lake: parquet shard round trips, dedup by key, latest status, crash leftovers, runs."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from data.lake import (
    TABLES,
    VERIFIER_SPEC,
    Attempt,
    Checkpoint,
    Difficulty,
    Evidence,
    ExactOrF1Spec,
    Lake,
    Lineage,
    LLMEquivalenceSpec,
    Message,
    RubricSpec,
    SourceRef,
    Status,
    Task,
    ToolCall,
    ToolCallsSpec,
    UnitTestsSpec,
    Usage,
    Verdict,
    VerifierSpec,
    WorldStateSpec,
    funnel,
    hashed_spec,
    utcnow,
)
from data.lake import store as lake_module


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path / "home")


def make_task(question: str = "What is the capital of France?", answer: str = "Paris") -> Task:
    prompt = [
        Message(role="system", content="Answer with a short phrase."),
        Message(role="user", content=question),
    ]
    verifier = ExactOrF1Spec()
    return Task(
        task_id=Task.make_id("doc_qa", prompt, answer, verifier),
        kind="doc_qa",
        prompt=prompt,
        answer=answer,
        verifier=verifier,
        evidence=[Evidence(chunk_id="c1", quote=f"The capital is {answer}.")],
        source=[SourceRef(source_id="s1", path="docs/france.md", chunk_id="c1")],
        lineage=Lineage(
            generator="doc_qa",
            generator_version="1",
            prompt_hash="ph",
            model="fake-model",
            seed="7",
            knobs={"max_answer_words": 8, "style": "short"},
        ),
    )


def make_status(item_id: str, status: str, *, stage: str = "generate", minutes: int = 0) -> Status:
    return Status(
        stage=stage,
        item_id=item_id,
        status=status,
        reason=status,
        detail="",
        run_id="run-1",
        recorded_at=utcnow() + timedelta(minutes=minutes),
    )


def test_task_round_trip_keeps_prompt_messages(lake: Lake) -> None:
    tasks = [make_task(), make_task("What is the capital of Italy?", "Rome")]
    lake.write("tasks", tasks, run_id="run-1")

    read = lake.records("tasks")

    assert sorted(read, key=lambda t: t.task_id) == sorted(tasks, key=lambda t: t.task_id)
    by_id = {t.task_id: t for t in read}
    assert by_id[tasks[1].task_id].prompt == tasks[1].prompt
    assert all(isinstance(m, Message) for m in by_id[tasks[1].task_id].prompt)
    assert by_id[tasks[0].task_id].lineage.knobs == {"max_answer_words": 8, "style": "short"}


def test_status_round_trip(lake: Lake) -> None:
    status = make_status("item-1", "rejected")
    lake.write("status", [status])

    assert lake.records("status") == [status]


def test_record_to_row_from_row_round_trip() -> None:
    task = make_task()
    row = task.to_row()
    assert row["prompt"] == [m.model_dump() for m in task.prompt]  # structs, not JSON
    assert json.loads(row["verifier"]) == {  # its type's fields only
        "type": "exact_or_f1",
        "f1_threshold": 0.6,
        "context": [],
        "rubric": [],
        "negatives": [],
    }
    assert Task.from_row(row) == task

    verdict = Verdict(
        verdict_id="v1",
        task_id=task.task_id,
        check="closed_book",
        judge="judge:0",
        judge_model="m",
        prompt_version="1",
        decision="fail",
        confidence=None,
        reason="leak",
        response="Paris",
        usage=Usage(prompt_tokens=12, completion_tokens=1),
    )
    assert Verdict.from_row(verdict.to_row()) == verdict
    status = make_status("x", "done")
    assert Status.from_row(status.to_row()) == status


def test_task_make_id_is_stable_and_depends_on_answer() -> None:
    a, b = make_task(), make_task()
    assert a.task_id == b.task_id
    assert a.task_id == Task.make_id(a.kind, list(a.prompt), a.answer, a.verifier)
    assert make_task(answer="Lyon").task_id != a.task_id
    assert make_task(question="Capital of France?").task_id != a.task_id


# ids the single VerifierSpec model that held every type's fields gave, before the union
PINNED_IDS: list[tuple[VerifierSpec, str]] = [
    (ExactOrF1Spec(), "ff999c8f30146d05"),
    (
        ExactOrF1Spec(f1_threshold=1.0, context=["Built in", "."], rubric=["fills the blank"]),
        "048859b3005c5973",
    ),
    (LLMEquivalenceSpec(rubric=["names the port", "commits to one answer"]), "5856023cbc3a4a3a"),
    (
        UnitTestsSpec(fail_to_pass=["t.py::test_x"], pass_to_pass=["t.py::test_y"]),
        "e8c51446b9b243e2",
    ),
    (
        UnitTestsSpec(
            checkpoints=[
                Checkpoint(test_patch="--- a\n+++ b\n", fail_to_pass=["t::a"], pass_to_pass=[]),
                Checkpoint(test_patch="", fail_to_pass=["t::b"], pass_to_pass=["t::a"]),
            ]
        ),
        "4b5fdff8aee367d3",
    ),
    (RubricSpec(rubric=["names the window"], negatives=["I cannot help."]), "870d264bbf2a20c6"),
    (
        ToolCallsSpec(
            tool_calls=[
                ToolCall(name="lookup", arguments={"order_id": 7}),
                ToolCall(name="refund", call_id="c2"),
            ]
        ),
        "1d310a0db02b3fbf",
    ),
    (
        WorldStateSpec(
            tool_calls=[ToolCall(name="add_item", arguments={"sku": "A1", "qty": 2})],
            final_state={"items": [{"sku": "A1", "qty": 2}]},
        ),
        "70db4600244b233f",
    ),
]


@pytest.mark.parametrize(("verifier", "task_id"), PINNED_IDS)
def test_task_ids_hash_the_verifier_as_before_the_union(verifier: VerifierSpec, task_id: str):
    prompt = [Message(role="user", content="When was the Orvanne Bridge built?")]
    assert Task.make_id("doc_qa", prompt, "1887", verifier) == task_id


def test_the_hashed_verifier_keeps_the_single_model_shape() -> None:
    assert hashed_spec(RubricSpec(rubric=["names the window"])) == {
        "type": "rubric",
        "f1_threshold": 0.6,
        "context": [],
        "rubric": ["names the window"],
    }


# a verifier as rows written before the union hold it: every type's fields, unset ones empty
OLD_ROW_VERIFIER = (
    '{"checkpoints": [], "context": [], "f1_threshold": 0.6, "fail_to_pass": [],'
    ' "final_state": null, "negatives": ["I cannot help."], "pass_to_pass": [],'
    ' "rubric": ["names the window"], "tool_calls": [], "type": "rubric"}'
)


def test_verifiers_of_rows_written_before_the_union_still_load() -> None:
    row = {**make_task().to_row(), "verifier": OLD_ROW_VERIFIER}
    verifier = Task.from_row(row).verifier
    assert verifier == RubricSpec(rubric=["names the window"], negatives=["I cannot help."])
    old = json.loads(OLD_ROW_VERIFIER)
    world = {**old, "type": "world_state", "rubric": [], "negatives": [], "final_state": {}}
    assert VERIFIER_SPEC.validate_python(world) == WorldStateSpec(final_state={})
    for field, value in [("f1_threshold", 0.9), ("fail_to_pass", ["t::a"]), ("context", ["x"])]:
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            VERIFIER_SPEC.validate_python({**old, field: value})


def test_writing_same_records_twice_does_not_duplicate(lake: Lake) -> None:
    tasks = [make_task(), make_task("What is the capital of Spain?", "Madrid")]
    lake.write("tasks", tasks)
    lake.write("tasks", tasks)

    assert len(lake.shards("tasks")) == 2
    assert len(lake.records("tasks")) == 2
    assert lake.rows("SELECT count(*) AS n FROM tasks") == [{"n": 2}]


def test_latest_status_wins_and_finished_items_ignores_failed(lake: Lake) -> None:
    lake.write(
        "status",
        [
            make_status("a", "failed", minutes=0),
            make_status("b", "done", minutes=0),
            make_status("c", "rejected", minutes=0),
            make_status("d", "failed", minutes=0),
            make_status("a", "done", stage="verify", minutes=0),
        ],
    )
    lake.write(
        "status",
        [
            make_status("a", "done", minutes=1),  # a retried and finished
            make_status("b", "failed", minutes=1),  # b's later failure is what counts
        ],
    )

    latest = {(s.stage, s.item_id): s.status for s in lake.records("status")}

    assert latest == {
        ("generate", "a"): "done",
        ("generate", "b"): "failed",
        ("generate", "c"): "rejected",
        ("generate", "d"): "failed",
        ("verify", "a"): "done",
    }
    assert lake.finished_items("generate") == {"a", "c"}
    assert lake.finished_items("verify") == {"a"}
    assert lake.finished_items("calibrate") == set()


def test_latest_status_wins_by_time_not_by_write_order(lake: Lake) -> None:
    lake.write("status", [make_status("a", "done", minutes=5)])
    # written later but recorded earlier: `recorded_at` decides, not the shard order
    lake.write("status", [make_status("a", "failed", minutes=0)])

    assert lake.finished_items("generate") == {"a"}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_empty_table_reads_zero_rows_with_columns(lake: Lake, table: str) -> None:
    with lake.connect() as con:
        result = con.execute(f"SELECT * FROM {table}")
        columns = [d[0] for d in result.description]
        assert result.fetchall() == []
    assert columns == list(TABLES[table].record.model_fields)
    assert lake.records(table) == []


def test_a_write_killed_midway_leaves_no_shard_and_the_rows_before_it_readable(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard is written whole or not at all: a write that dies with half its bytes on disk
    leaves no shard a reader sees (it went to a temporary name, renamed only once whole)."""
    first = make_task()
    shard = lake.write("tasks", [first])
    written = pq.write_table

    def torn(table: pa.Table, where, **options) -> None:
        whole = pa.BufferOutputStream()
        written(table, whole, **options)
        data = whole.getvalue().to_pybytes()
        where.write(data[: len(data) // 2])
        raise KeyboardInterrupt  # the process killed mid-write

    monkeypatch.setattr(lake_module.pq, "write_table", torn)
    with pytest.raises(KeyboardInterrupt):
        lake.write("tasks", [make_task("What is the capital of Peru?", "Lima")])
    monkeypatch.undo()

    assert lake.shards("tasks") == [shard]
    assert lake.records("tasks") == [first]


def test_leftover_tmp_shard_is_ignored(lake: Lake) -> None:
    task = make_task()
    shard = lake.write("tasks", [task])
    assert shard is not None
    half = shard.read_bytes()[: shard.stat().st_size // 2]
    (shard.parent / f".{shard.name}.deadbeef.tmp").write_bytes(half)  # crash mid-write
    status_dir = lake.root / "status"
    status_dir.mkdir()
    (status_dir / ".20990101T000000-crashed.parquet.tmp").write_bytes(b"PAR1 truncated")

    assert lake.shards("tasks") == [shard]
    assert lake.records("tasks") == [task]
    assert lake.records("status") == []
    run_id = lake.start_run("generate")
    lake.finish_run(run_id, "done", {})
    with duckdb.connect(str(lake.catalog_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM tasks").fetchone() == (1,)


def test_runs_round_trip(lake: Lake) -> None:
    assert lake.runs() == []

    run_id = lake.start_run("generate --max-chunks 3")
    (running,) = lake.runs()
    assert running["run_id"] == run_id
    assert running["command"] == "generate --max-chunks 3"
    assert running["state"] == "running"
    assert running["started_at"] is not None and running["finished_at"] is None

    lake.finish_run(run_id, "done", {"tasks": 2, "failed": 0})
    second = lake.start_run("verify")

    first, latest = lake.runs()
    assert first["run_id"] == run_id and latest["run_id"] == second
    assert first["state"] == "done"
    assert first["finished_at"] >= first["started_at"]
    assert json.loads(first["summary"]) == {"tasks": 2, "failed": 0}
    assert latest["state"] == "running"


def test_catalog_has_queryable_tasks_view_after_finish_run(lake: Lake) -> None:
    tasks = [make_task(), make_task("What is the capital of Peru?", "Lima")]
    lake.write("tasks", tasks)
    lake.write("tasks", tasks[:1])  # a duplicate shard: the view deduplicates too
    run_id = lake.start_run("generate")
    lake.finish_run(run_id, "done", {"tasks": 2})

    with duckdb.connect(str(lake.catalog_path), read_only=True) as con:
        rows = con.execute("SELECT task_id, answer FROM tasks ORDER BY answer").fetchall()
        columns = [d[0] for d in con.execute("SELECT * FROM tasks").description]
        runs = con.execute("SELECT run_id, state FROM runs").fetchall()

    assert rows == [(tasks[1].task_id, "Lima"), (tasks[0].task_id, "Paris")]
    assert "_shard" not in columns and columns == list(Task.model_fields)
    assert runs == [(run_id, "done")]


def test_shards_written_before_a_column_existed_read_with_its_default(lake: Lake) -> None:
    attempt = Attempt(
        attempt_id="a1",
        task_id="t1",
        index=0,
        harness="closed_book",
        solver_model="m",
        temperature=0.8,
        seed=1,
        response="Paris",
        reward=1.0,
        usage=Usage(),
        reason="exact match",
    )
    old = pa.Table.from_pylist([attempt.to_row()], schema=Attempt.arrow_schema()).drop(["reason"])
    folder = lake.root / "attempts"
    folder.mkdir(parents=True)
    pq.write_table(old, folder / "20200101T000000000000-old-00000000.parquet")

    (read,) = lake.records("attempts")
    assert read.reason == "" and read.response == "Paris"
    assert lake.rows("SELECT count(*) AS n FROM attempts WHERE reason IS NULL") == [{"n": 1}]
    lake.write("attempts", [attempt.model_copy(update={"attempt_id": "a2"})])
    assert [a.reason for a in lake.records("attempts")] == ["", "exact match"]
    lake.finish_run(lake.start_run("calibrate"), "done", {})
    with duckdb.connect(str(lake.catalog_path), read_only=True) as con:
        assert con.execute("SELECT reason FROM attempts ORDER BY attempt_id").fetchall() == [
            (None,),
            ("exact match",),
        ]


def measured(harness: str, band: str, stage: str | None = None) -> Difficulty:
    return Difficulty(
        task_id="t1", solver_model="A", harness=harness, stage=stage, n=8, passes=4,
        pass_rate=0.5, pass_at_k=1.0, ci_low=0.2, ci_high=0.8, confidence=0.9, band=band,
        pool="normal", learnability=1.0,
    )  # fmt: skip


def test_each_calibrate_stage_picks_the_row_it_wrote(lake: Lake) -> None:
    """The pipeline's calibration and a re-calibration with the same solver and harness keep
    a row each: the stage is part of the key, not a string in the status detail."""
    lake.write(
        "difficulty",
        [
            measured("doc_search", "in_band", "calibrate"),
            measured("doc_search", "too_easy", "calibrate:A"),
        ],
    )
    lake.write(
        "status",
        [make_status("t1", "done", stage=s) for s in ("calibrate", "calibrate:A")],
    )
    summary = funnel(lake)
    assert summary["bands"] == {"in_band": 1}
    assert summary["recalibrated_bands"] == {"calibrate:A": {"too_easy": 1}}


def test_old_calibrate_statuses_still_pick_their_row_beside_a_recalibration(lake: Lake) -> None:

    lake.write(
        "difficulty", [measured("closed_book", "in_band"), measured("doc_search", "too_easy")]
    )
    old = make_status("t1", "done", stage="calibrate")  # written before details named the row
    recal = make_status("t1", "done", stage="calibrate:A").model_copy(
        update={"detail": "A|doc_search"}
    )
    lake.write("status", [old, recal])
    summary = funnel(lake)
    assert summary["bands"] == {"in_band": 1}
    assert summary["recalibrated_bands"] == {"calibrate:A": {"too_easy": 1}}


def test_queries_from_threads_on_two_lakes_each_see_their_own_shards(tmp_path: Path) -> None:
    """Lake queries share one in-memory database at a time and swap it when another lake is
    queried; each query's views are its own, so interleaved queries never mix the lakes."""
    lakes = {name: Lake(tmp_path / name) for name in ("one", "two")}
    for name, lake in lakes.items():
        lake.write("status", [make_status(f"{name}-{i}", "done") for i in range(3)])

    def items(name: str) -> set[str]:
        return lakes[name].finished_items("generate")

    order = ["one"] * 20 + ["two"] * 20 + ["one", "two"] * 10  # shared, then swapped
    with ThreadPoolExecutor(max_workers=8) as pool:
        seen = list(pool.map(items, order))

    assert seen == [{f"{name}-{i}" for i in range(3)} for name in order]
