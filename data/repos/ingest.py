"""Repository ingestion: mirror a git repository and record its commits.

The origin (a local path or a git URL) is mirrored under FOUNDRY_HOME/repos/<repo_id>.git and
read from there, so later stages check out any revision without touching the original. Every
commit in the range (default: the history of HEAD) is recorded with its message, author, the
files it changed (test or not, by the repository's language) and its diff against its first
parent. A repository that cannot be read, is in no supported language or has no tests is
recorded with the reason and nothing else.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from data.documents import Progress
from data.lake import ChangedFile, Commit, CommitKind, Lake, Repo, Status, content_id, utcnow
from data.repos.git_cli import EMPTY_TREE, GitError, git
from data.runtime.languages import Language, detect_language

MAX_DIFF_CHARS = 200_000
STAGE = "ingest_repo"


def ingest_repo(
    origin: str,
    lake: Lake,
    home: Path,
    run_id: str,
    rev: str | None = None,
    progress: Progress = lambda message: None,
) -> Counter:
    """Mirror `origin` and record the commits of `rev` (a `git rev-list` range) not yet in the
    lake; the repository's outcome goes to the status table (stage `ingest_repo`)."""
    source = Path(origin).expanduser()
    origin = str(source.resolve()) if source.exists() else origin
    repo_id = content_id("repo", origin)
    mirror = home.resolve() / "repos" / f"{repo_id}.git"  # read from any working folder

    def outcome(state: str, reason: str, detail: str = "") -> Counter:
        lake.write("status", [Status.now(STAGE, repo_id, state, reason, detail, run_id)], run_id)
        return Counter({f"{state}:{reason}": 1})

    if rev is not None and rev.startswith("-"):
        return outcome("rejected", "bad_revision_range", rev)
    try:
        _mirror(origin, mirror)
        head = git(mirror, "rev-parse", "HEAD").strip()
        files = git(mirror, "ls-tree", "-r", "--name-only", "-z", head).split("\0")[:-1]
        shas = git(mirror, "rev-list", "--reverse", "--first-parent", rev or head).split()
    except GitError as error:
        return outcome("rejected", "unreadable", str(error))
    language = detect_language(files)
    if language is None:
        return outcome("rejected", "unsupported_language", f"{len(files)} files at HEAD")
    tests = [f for f in files if language.is_test_file(f)]
    if not tests:
        return outcome("rejected", "no_tests", f"no {language.name} test files at HEAD")

    known = {
        row["sha"] for row in lake.rows("SELECT sha FROM commits WHERE repo_id = ?", [repo_id])
    }
    fresh = [sha for sha in shas if sha not in known]
    commits = []
    for index, sha in enumerate(fresh, start=1):
        commits.append(read_commit(mirror, repo_id, sha, language))
        if index % 100 == 0:
            progress(f"ingest repo: {index}/{len(fresh)} commits")
    repo = Repo(
        repo_id=repo_id,
        origin=origin,
        mirror=str(mirror),
        language=language.name,
        head=head,
        n_commits=len(shas),
        n_test_files=len(tests),
        ingested_at=utcnow(),
    )
    lake.write("commits", commits, run_id)
    lake.write("repos", [repo], run_id)
    counts = outcome("done", "ingested", f"{len(fresh)} new of {len(shas)} commits")
    counts.update(f"commit:{c.kind}" for c in commits)
    return counts


def _mirror(origin: str, mirror: Path) -> None:
    if mirror.exists():
        git(mirror, "remote", "set-url", "origin", origin)
        git(mirror, "fetch", "--quiet", "--prune", "origin", "+refs/*:refs/*")
    else:
        mirror.parent.mkdir(parents=True, exist_ok=True)
        tmp = mirror.with_name(mirror.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)  # left by a clone that crashed
        git(None, "clone", "--quiet", "--mirror", "--no-hardlinks", "--", origin, str(tmp))
        tmp.rename(mirror)


def read_commit(mirror: Path, repo_id: str, sha: str, language: Language) -> Commit:
    """One commit with its change against its first parent (the empty tree for a root)."""
    header = git(mirror, "show", "-s", "--format=%P%x00%an <%ae>%x00%aI%x00%B", sha)
    parents, author, authored_at, message = header.split("\0", 3)
    parent = parents.split()[0] if parents.split() else ""
    base = parent or EMPTY_TREE
    numstat = git(mirror, "diff", "--numstat", "--no-renames", "-z", base, sha)
    files = [_changed_file(entry, language) for entry in numstat.split("\0") if entry]
    diff = git(mirror, "diff", "--no-renames", "--no-color", base, sha)
    return Commit(
        repo_id=repo_id,
        sha=sha,
        parent=parent,
        author=author,
        authored_at=authored_at,
        message=message.strip(),
        files=files,
        kind=_kind(files, language),
        diff=diff[:MAX_DIFF_CHARS],
        diff_truncated=len(diff) > MAX_DIFF_CHARS,
    )


def _changed_file(entry: str, language: Language) -> ChangedFile:
    added, deleted, path = entry.split("\t", 2)
    return ChangedFile(
        path=path,
        additions=None if added == "-" else int(added),
        deletions=None if deleted == "-" else int(deleted),
        is_test=language.is_test_file(path),
    )


def _kind(files: list[ChangedFile], language: Language) -> CommitKind:
    tests = any(f.is_test for f in files)
    source = any(language.is_source_file(f.path) for f in files)
    if source and tests:
        return "source_and_tests"
    if source:
        return "source_only"
    return "tests_only" if tests else "other"
