"""Stages over ingested repositories: replay commits, rebuild functions, inject bugs (all in
the sandbox, no LLM; the pipeline runs them before the LLM stages) and describe replayed
commits and chain them into sequences (the LLM stages of `families.commit_replay` and
`families.commit_sequence`).

Their tasks then go through the same verify and calibrate stages as document tasks, where the
unit-test verifier (`judges.unit_tests`) stands in for the judge panel.
"""

from __future__ import annotations

import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import families
from data.lake import Commit, CommitReplay, Record, Status, Task
from data.llm import LLMClient
from data.runtime.errors import ReasonedError
from data.runtime.python_env import EnvError
from data.runtime.sandbox import Limits
from families.code import repo_at
from families.commit_choice import replay_order
from families.stage import (
    LLMStage,
    Outcome,
    SandboxStage,
    StageContext,
    batches,
    within_cap,
)
from generators.checks import CheckFailure
from generators.commit_replay import Unusable, analyse, tests_at
from generators.commit_sequence import Link, chains, sequence_task
from generators.function_rebuild import Rejected, RepoAtHead
from generators.replay_tasks import KIND as REPLAY_TASK
from generators.replay_tasks import RepoOrigin, replay_task

# --- replay: ingested commit -> F2P / P2P tests and a checked reference patch ------------

REPLAY_BATCH = 8  # commits per shard of results
RETRY_REPLAY = {"dependencies_unavailable"}  # the package index may be back next run


def pending_replays(ctx: StageContext) -> list[str]:
    """Ingested commits (`repo_id:sha`) in the scope's window without a final replay outcome,
    in the order of `families.commit_choice`, within `code.max_replays` (none when no kind
    built on replays is in scope)."""
    sql = "SELECT repo_id, sha, authored_at, kind, parent FROM commits"
    return _commits_within_cap(ctx, "replay", sql)


def _commits_within_cap(ctx: StageContext, stage: str, sql: str) -> list[str]:
    """The commits `sql` selects (its rows as `replay_order` takes them) that are in the scope's
    window and that `stage` has not finished, within `code.max_replays` (`within_cap`)."""
    if not ctx.config.scope.makes(*families.kinds_running(REPLAY)):  # built on replayed commits
        return []
    rows = [row for row in ctx.lake.rows(sql) if ctx.config.scope.covers(row["authored_at"])]
    return within_cap(ctx, stage, replay_order(rows), ctx.config.code.max_replays)


def replay_commits(ctx: StageContext) -> Counter:
    """Replay every pending commit in the sandbox (`generators.commit_replay`) and record the
    F2P / P2P tests of those that hold up, and why the others do not. Each repository with
    commits in the scope's window has its suite run once at its HEAD first, whether or not
    `code.max_replays` leaves it a commit to replay (that check says why a repository is
    unusable, and is no replay): if nothing passes there, its commits are not replayed."""
    pending = pending_replays(ctx)
    mirrors = {r["repo_id"]: Path(r["mirror"]) for r in ctx.lake.rows("SELECT * FROM repos")}
    limits = ctx.limits
    windowed = {
        row["repo_id"]
        for row in ctx.lake.rows("SELECT repo_id, authored_at FROM commits")
        if ctx.config.scope.covers(row["authored_at"])
    }
    counts = check_repo_tests(ctx, sorted(windowed), limits)
    broken = {
        row["item_id"]
        for row in ctx.lake.rows(
            "SELECT item_id FROM status WHERE stage = 'repo_tests' AND status = 'rejected'"
        )
    }
    runnable = ctx.lake.finished_items("repo_tests")
    for index, group in enumerate(batches(pending, REPLAY_BATCH)):
        commits = ctx.lake.records("commits", "list_contains(?, repo_id || ':' || sha)", [group])
        replays, statuses = [], []
        for commit in commits:
            if commit.repo_id not in runnable:
                continue  # its check failed for a reason that may pass next run
            item = f"{commit.repo_id}:{commit.sha}"
            if commit.repo_id in broken:
                status = ctx.status("replay", item, "rejected", "repo_tests_do_not_run")
            else:
                status, replay = _replay_one(ctx, commit, mirrors[commit.repo_id], limits)
                replays += [replay] if replay else []
            statuses.append(status)
            counts[f"{status.status}:{status.reason}"] += 1
        ctx.lake.write("replays", replays, ctx.run_id)
        ctx.lake.write("status", statuses, ctx.run_id)
        done = min((index + 1) * REPLAY_BATCH, len(pending))
        ctx.progress(f"replay: {done}/{len(pending)} commits")
    return counts


REPLAY = SandboxStage(
    "replay",
    pending_replays,
    replay_commits,
    help="run ingested commits' tests in the sandbox: fail-to-pass, pass-to-pass",
)


def check_repo_tests(ctx: StageContext, repo_ids: list[str], limits: Limits) -> Counter:
    """Run each repository's suite once at its HEAD (stage `repo_tests`) unless done before."""
    checked = ctx.lake.finished_items("repo_tests")
    repos = {r["repo_id"]: r for r in ctx.lake.rows("SELECT * FROM repos")}
    statuses = []
    for repo_id in repo_ids:
        if repo_id in checked or repo_id not in repos:
            continue
        repo = repos[repo_id]
        try:
            result = tests_at(Path(repo["mirror"]), repo["head"], limits)
        except ReasonedError as error:  # no sandbox here, say: retried next run
            statuses.append(ctx.status("repo_tests", repo_id, "failed", error.reason, error.detail))
            continue
        except Exception as error:  # noqa: BLE001 - recorded; the other repositories go on
            detail = traceback.format_exception_only(error)[-1].strip()
            statuses.append(ctx.status("repo_tests", repo_id, "failed", "internal_error", detail))
            continue
        if isinstance(result, Unusable):
            statuses.append(_unusable(ctx, "repo_tests", repo_id, result))
        else:
            detail = f"{len(result.passed())} of {len(result.outcomes)} pass at HEAD"
            statuses.append(ctx.status("repo_tests", repo_id, "done", "tests_run", detail))
    ctx.lake.write("status", statuses, ctx.run_id)
    return Counter(f"repo_tests:{s.status}:{s.reason}" for s in statuses)


def _unusable(ctx: StageContext, stage: str, item: str, result: Unusable) -> Status:
    """`failed` (retried next run) where the cause may pass, else `rejected`."""
    state = "failed" if result.reason in RETRY_REPLAY else "rejected"
    return ctx.status(stage, item, state, result.reason, result.detail)


def _replay_one(
    ctx: StageContext, commit: Commit, mirror: Path, limits: Limits
) -> tuple[Status, CommitReplay | None]:
    item = f"{commit.repo_id}:{commit.sha}"
    try:
        result = analyse(commit, mirror, limits)
    except ReasonedError as error:
        return ctx.status("replay", item, "failed", error.reason, error.detail), None
    except Exception as error:  # noqa: BLE001 - recorded; the other commits go on
        detail = traceback.format_exception_only(error)[-1].strip()
        return ctx.status("replay", item, "failed", "internal_error", detail), None
    if isinstance(result, Unusable):
        return _unusable(ctx, "replay", item, result), None
    detail = f"{len(result.fail_to_pass)} F2P, {len(result.pass_to_pass)} P2P"
    return ctx.status("replay", item, "done", "replayed", detail), result


# --- a repository at its HEAD -> tasks, in the sandbox (function rebuild, bug injection) ---

Made = Task | Rejected
MakeTasks = Callable[[RepoAtHead, StageContext], Iterable[Made]]


@dataclass(frozen=True)
class RepositoryStage:
    """A sandbox stage that makes tasks from each repository at its HEAD, one candidate
    function at a time: the stage `name` records each repository's outcome, `<name>_target`
    each function's."""

    name: str
    made: str  # the reason of a repository that yielded tasks
    none: str  # the reason of one that yielded none
    noun: str  # what its tasks are called in the progress line

    def run(self, ctx: StageContext, pending: list[str], make: MakeTasks) -> Counter:
        counts: Counter = Counter()
        repos = {r["repo_id"]: r for r in ctx.lake.rows("SELECT * FROM repos")}
        for repo_id in pending:
            repo = repo_at(repos[repo_id], repos[repo_id]["head"])
            tasks: list[Record] = []
            parts: list[Status] = []
            target_stage = f"{self.name}_target"
            try:
                for result in make(repo, ctx):
                    if isinstance(result, Task):
                        tasks.append(result)
                        item = f"{repo_id}:{result.lineage.knobs['function']}"
                        parts.append(ctx.status(target_stage, item, "done", self.made))
                    else:
                        item = f"{repo_id}:{result.item}"
                        parts.append(ctx.status(target_stage, item, "rejected", result.reason))
                state, reason = ("done", self.made) if tasks else ("rejected", self.none)
                detail = f"{len(tasks)} tasks"
            except CheckFailure as failure:
                state, reason, detail = "rejected", failure.reason, ""
            except EnvError as error:
                state, reason, detail = "failed", "dependencies_unavailable", error.detail
            except ReasonedError as error:
                state, reason, detail = "failed", error.reason, error.detail
            except Exception as error:  # noqa: BLE001 - recorded; the other repositories go on
                state, reason = "failed", "internal_error"
                detail = traceback.format_exception_only(error)[-1].strip()
            ctx.lake.write("tasks", tasks, ctx.run_id)
            outcome = ctx.status(self.name, repo_id, state, reason, detail)
            ctx.lake.write("status", [*parts, outcome], ctx.run_id)
            counts.update(f"{p.status}:{p.reason}" for p in parts)
            counts[f"{self.name}:{state}:{reason}"] += 1
            ctx.progress(f"{self.name}: {repo_id}: {len(tasks)} {self.noun} tasks")
        return counts


# --- describe: replayed commit -> commit-replay task (LLM) ------------------------------------


def pending_describe(ctx: StageContext) -> list[str]:
    """Replayed commits in the scope's window without a task yet, in the replay stage's order,
    within `code.max_replays` (which also holds where a lake's commits were replayed under a
    higher cap)."""
    sql = (
        "SELECT r.repo_id, r.sha, c.authored_at, c.kind, c.parent FROM replays r"
        " JOIN commits c USING (repo_id, sha)"
    )
    return _commits_within_cap(ctx, "describe", sql)


def _repo_origins(ctx: StageContext) -> dict[str, RepoOrigin]:
    """Every repository in the lake: its origin and mirror, by id."""
    return {
        r["repo_id"]: RepoOrigin(r["repo_id"], r["origin"], Path(r["mirror"]))
        for r in ctx.lake.rows("SELECT repo_id, origin, mirror FROM repos")
    }


@dataclass(frozen=True)
class ToDescribe:
    """A replayed commit, the commit, and its repository's origin and mirror."""

    replay: CommitReplay
    commit: Commit
    repo: RepoOrigin


def load_replays(ctx: StageContext, items: list[str]) -> dict[str, ToDescribe]:
    """Each replay with its commit and its repository's origin and mirror."""
    where = "list_contains(?, repo_id || ':' || sha)"
    replays = {f"{r.repo_id}:{r.sha}": r for r in ctx.lake.records("replays", where, [items])}
    commits = {f"{c.repo_id}:{c.sha}": c for c in ctx.lake.records("commits", where, [items])}
    repos = _repo_origins(ctx)
    return {
        item: ToDescribe(replay, commits[item], repos[replay.repo_id])
        for item, replay in replays.items()
        if item in commits and replay.repo_id in repos
    }


async def describe_one(
    ctx: StageContext, item: str, loaded: ToDescribe, client: LLMClient
) -> Outcome:
    try:
        task = await replay_task(loaded.replay, loaded.commit, loaded.repo, client, ctx.config.code)
    except CheckFailure as failure:
        return Outcome(ctx.status("describe", item, "rejected", failure.reason))
    statement = task.lineage.knobs["statement"]
    return Outcome(
        ctx.status("describe", item, "done", "described", f"{statement}: {task.task_id}"),
        {"tasks": [task]},
    )


DESCRIBE = LLMStage(
    "describe",
    pending_describe,
    load_replays,
    describe_one,
    help="write commit-replay tasks: a statement for each replayed commit",
)


# --- sequence: consecutive described commits -> commit-sequence task -------------------------

# the commit-replay tasks `describe` wrote (their kind is `replay_task`'s)
_REPLAY_TASKS_SQL = """
SELECT * FROM tasks WHERE kind = ?
  AND json_extract_string(lineage, '$.repair.root') IS NULL
"""


def _links(ctx: StageContext) -> dict[str, list[Link]]:
    """Every chain of `code.sequence_steps` consecutive commits whose commit-replay tasks
    exist, by item id (`repo_id:sha+sha…`)."""
    steps = ctx.config.code.sequence_steps
    if steps < 2 or not ctx.config.scope.makes(*families.kinds_running(SEQUENCE)):
        return {}
    tasks = {}
    for row in ctx.lake.rows(_REPLAY_TASKS_SQL, [REPLAY_TASK]):
        task = Task.from_row(row)
        tasks[(task.workspace.repo_id, str(task.lineage.knobs["commit"]))] = task
    replays = {(r.repo_id, r.sha): r for r in ctx.lake.records("replays")}
    found: dict[str, list[Link]] = {}
    for repo_id in sorted({repo for repo, _ in tasks}):
        commits = ctx.lake.records("commits", "repo_id = ?", [repo_id])
        in_window = {c.sha for c in commits if ctx.config.scope.covers(c.authored_at)}
        usable = {sha for repo, sha in tasks if repo == repo_id and sha in in_window}
        for run in chains(commits, usable, steps):
            item = f"{repo_id}:" + "+".join(c.sha for c in run)
            found[item] = [Link(c, replays[(repo_id, c.sha)], tasks[(repo_id, c.sha)]) for c in run]
    return found


def pending_sequences(ctx: StageContext) -> list[str]:
    finished = ctx.lake.finished_items("sequence")
    return [item for item in _links(ctx) if item not in finished]


@dataclass(frozen=True)
class ToSequence:
    """A chain of consecutive commits whose replay tasks exist, and their repository."""

    links: list[Link]
    repo: RepoOrigin


def load_sequences(ctx: StageContext, items: list[str]) -> dict[str, ToSequence]:
    repos = _repo_origins(ctx)
    links = _links(ctx)
    return {
        item: ToSequence(links[item], repos[item.split(":")[0]]) for item in items if item in links
    }


async def sequence_one(
    ctx: StageContext, item: str, loaded: ToSequence, client: LLMClient
) -> Outcome:
    """Build one commit-sequence task (no model is asked: the steps' statements are those of
    the commits' replay tasks)."""
    try:
        task = sequence_task(loaded.links, loaded.repo, ctx.config.code)
    except CheckFailure as failure:
        return Outcome(ctx.status("sequence", item, "rejected", failure.reason))
    status = ctx.status("sequence", item, "done", "sequenced", task.task_id)
    return Outcome(status, {"tasks": [task]})


SEQUENCE = LLMStage(
    "sequence",
    pending_sequences,
    load_sequences,
    sequence_one,
    help="commit-sequence tasks: consecutive described commits as ordered steps",
)
