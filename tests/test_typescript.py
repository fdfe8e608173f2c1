"""Code tasks from the bundled TypeScript repository (`tabshare`, run by Node 24 with its types
stripped, tested with Node's test runner): read as TypeScript, its functions and mutants found
with the TypeScript grammar, and, in `make test-full`, its tasks through every admission gate
(the outside check and the red team's Node attacks) to export."""

from __future__ import annotations

import pytest

from data.export import export_taskset, read_tasks
from data.repos import TABSHARE, build_sample_repo, git, ingest_repo
from data.runtime.languages import TypeScript, project_files, tree_language
from families import export_kinds
from families.bug_injection import inject_bugs
from families.code_stages import replay_commits
from families.function_rebuild import rebuild_functions
from generators.function_targets import targets
from generators.mutations import mutants_of_change
from sources import groupings
from tests.conftest import endpoints_for, make_context, run_llm_stages
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.oracle import Oracle


def test_the_sample_is_read_as_typescript_with_its_functions_and_mutants(tmp_path):
    repo = build_sample_repo(tmp_path / "tabshare", TABSHARE)
    assert isinstance(tree_language(repo), TypeScript)
    assert "test/items.test.ts" in project_files(repo)
    source = (repo / "src" / "split.ts").read_text()
    found = {t.qualname for t in targets("src/split.ts", source)}
    assert "splitEvenly" in found
    [mutant] = mutants_of_change({"src/split.ts": ""}, {"src/split.ts": source}, 1)
    assert mutant["src/split.ts"] != source and "import type" in mutant["src/split.ts"]


@pytest.mark.full
def test_typescript_tasks_pass_every_admission_gate_and_are_exported(tmp_path):
    repo = build_sample_repo(tmp_path / "tabshare", TABSHARE)
    head = {p: (repo / p).read_text() for p in git(repo, "ls-files", "src").splitlines()}
    settings = {
        "code": {"max_functions": 2, "max_bugs": 1},
        "calibrate": {"method": "fixed", "k": 2},
        "repair": {"max_steps": 0},
    }
    ctx = make_context(tmp_path / "home", **settings)
    ingest_repo(str(repo), ctx.lake, ctx.config.home, ctx.run_id)
    replay_commits(ctx) + rebuild_functions(ctx) + inject_bugs(ctx)
    with FakeOpenAIServer(Oracle(code=head)) as server:
        run_llm_stages(ctx, endpoints_for(server))
    [row] = ctx.lake.rows("SELECT language FROM repos")
    assert row["language"] == "typescript"
    reasons = [
        r["reason"] for r in ctx.lake.rows("SELECT reason FROM status WHERE stage = 'verify'")
    ]
    assert "gold_self_check_passed" in reasons, reasons
    export = export_taskset(
        ctx.lake, "ts", tmp_path / "tasksets", kinds=export_kinds(), groupings=groupings()
    )
    rows = read_tasks(export.path).to_pylist()
    code = [r for r in rows if r["kind"] in ("commit_replay", "function_rebuild", "bug_fix")]
    assert code, [r["kind"] for r in rows]
    assert any(".ts" in str(r["prompt"]) for r in code)  # its files are TypeScript
