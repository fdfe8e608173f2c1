"""Function-rebuild tasks: take the body out of a function the tests cover and ask for it back.

The known end state is the original function. A function is a task only if taking its body out
makes tests fail that pass with it (its fail-to-pass tests); every other passing test must keep
passing. The prompt shows the file with the body taken out, the signature, the docstring and
the lines elsewhere that call it.

Difficulty ladder (easiest first): `with_tests` shows the fail-to-pass tests' source; `base`
hides them; `no_docstring` also takes the docstring out; `two_functions` takes out a second
covered function of the same file as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from data.lake import Direction, Lineage, Task, Workspace, content_id
from data.prompts import load_prompt
from data.repos import git
from data.runtime.edits import file_diff
from data.runtime.languages import Language, of_path
from data.runtime.sandbox import Limits
from generators.checks import CheckFailure
from generators.code_tasks import code_task, files_at
from generators.function_targets import Target, targets
from generators.knobs import Ladder, Level, repaired
from generators.test_sources import test_sources
from harnesses.workspace import try_edits

GENERATOR = "function_rebuild"
VERSION = "2"
ONE = load_prompt(__file__, "function_rebuild_one")
MANY = load_prompt(__file__, "function_rebuild_many")
DEFINITIONS = ("def ", "async def ", "function ", "async function ", "export ")  # not calls
MAX_CALL_SITES = 6
MAX_PARTNERS = 3  # second functions tried for `two_functions`

LADDER = Ladder(
    levels=(
        Level("with_tests", {"docstring": "kept", "tests": "shown", "functions": 1}),
        Level("base", {"docstring": "kept", "tests": "hidden", "functions": 1}),
        Level("no_docstring", {"docstring": "dropped", "tests": "hidden", "functions": 1}),
        Level("two_functions", {"docstring": "dropped", "tests": "hidden", "functions": 2}),
    ),
    base="base",
)


@dataclass(frozen=True)
class Rejected:
    item: str
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class RepoAtHead:
    repo_id: str
    origin: str
    mirror: Path
    head: str
    language: Language


@dataclass(frozen=True)
class Removal:
    """What a task takes out of one file, and what its prompt shows."""

    targets: tuple[Target, ...]
    level: Level

    @property
    def keep_docstring(self) -> bool:
        return self.level.knobs["docstring"] == "kept"

    @property
    def show_tests(self) -> bool:
        return self.level.knobs["tests"] == "shown"


def blanked(source: str, target: Target, keep_docstring: bool = True) -> str:
    """`source` with the target's body (and, unless kept, its docstring) replaced by its
    language's stub."""
    lines = source.splitlines(keepends=True)
    start = target.body_start if keep_docstring or target.doc_start is None else target.doc_start
    stub = of_path(target.path).stub
    return "".join([*lines[: start - 1], f"{target.indent}{stub}\n", *lines[target.end :]])


def call_sites(target: Target, sources: dict[str, str]) -> list[str]:
    """Lines that call the target, as `path:line: code` (its own definition aside)."""
    needle = f".{target.name}(" if target.is_method else f"{target.name}("
    sites = []
    for path, text in sources.items():
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if needle in line and not stripped.startswith(DEFINITIONS):
                sites.append(f"{path}:{number}: {stripped}")
    return sites[:MAX_CALL_SITES]


def rebuild_tasks(
    repo: RepoAtHead, limits: Limits, max_functions: int, max_prompt_chars: int
) -> Iterator[Task | Rejected]:
    """Function-rebuild tasks of `repo` at its HEAD, at the ladder's base level: up to
    `max_functions` candidates (in a stable order spread over the files), each tried in the
    sandbox. Raises CheckFailure("tests_do_not_run") when no test passes at HEAD."""
    read = functions_at_head(repo)
    yield from read.unreadable
    candidates = sorted(read.functions, key=lambda t: content_id(repo.repo_id, t.item))
    passing = passing_at_head(repo, limits)
    base = LADDER.level(LADDER.base)
    for target in candidates[:max_functions]:
        removal = Removal((target,), base)
        result = build(repo, removal, read.sources, passing, limits, max_prompt_chars)
        yield Rejected(target.item, result.reason) if isinstance(result, CheckFailure) else result


@dataclass(frozen=True)
class FunctionsAtHead:
    """A repository's source files at HEAD, their functions, and the files that could not be
    read or parsed."""

    sources: dict[str, str]
    functions: list[Target]
    unreadable: list[Rejected]


def functions_at_head(repo: RepoAtHead) -> FunctionsAtHead:
    """The functions of every source file of `repo` at its HEAD (`function_targets`)."""
    sources: dict[str, str] = {}
    functions: list[Target] = []
    unreadable: list[Rejected] = []
    for path in source_paths(repo):
        try:
            sources.update(files_at(repo.mirror, repo.head, [path]))
            functions += targets(path, sources[path])
        except CheckFailure as failure:
            unreadable.append(Rejected(path, failure.reason))
        except (SyntaxError, ValueError) as error:
            unreadable.append(Rejected(path, "unparsable_source", type(error).__name__))
    return FunctionsAtHead(sources, functions, unreadable)


def passing_at_head(repo: RepoAtHead, limits: Limits) -> set[str]:
    """The tests that pass at `repo`'s HEAD, run in the sandbox; raises
    CheckFailure("tests_do_not_run") when none does."""
    workspace = Workspace(repo_id=repo.repo_id, origin=repo.origin, base=repo.head)
    baseline = try_edits(repo.mirror, workspace, None, [], limits).run
    passing = baseline.passed() if baseline else set()
    if not passing:
        raise CheckFailure("tests_do_not_run")
    return passing


def source_paths(repo: RepoAtHead) -> list[str]:
    """The source files of `repo` at its HEAD, as its language tells them from tests."""
    listed = git(repo.mirror, "ls-tree", "-r", "--name-only", repo.head).splitlines()
    return [p for p in listed if repo.language.is_source_file(p)]


def build(
    repo: RepoAtHead,
    removal: Removal,
    sources: dict[str, str],
    passing: set[str],
    limits: Limits,
    max_prompt_chars: int,
) -> Task | CheckFailure:
    """The task that takes `removal` out of its file, if its tests notice (else `not_covered`);
    `passing` holds the tests that pass at HEAD."""
    path = removal.targets[0].path
    original = stubbed = sources[path]
    for target in sorted(removal.targets, key=lambda t: -t.body_start):
        stubbed = blanked(stubbed, target, removal.keep_docstring)
    regions = {path: _stub_regions(removal)}
    workspace = Workspace(
        repo_id=repo.repo_id,
        origin=repo.origin,
        base=repo.head,
        start_patch=file_diff(path, original, stubbed),
    )
    run = try_edits(repo.mirror, workspace, None, [], limits).run
    still = run.passed() if run else set()
    fail_to_pass, pass_to_pass = sorted(passing - still), sorted(passing & still)
    if not fail_to_pass:
        return CheckFailure("not_covered")
    shown = test_sources(repo.mirror, repo.head, fail_to_pass, max_prompt_chars // 4)
    if removal.show_tests and not shown:
        return CheckFailure("tests_not_found")
    statement = _statement(removal, sources, shown if removal.show_tests else [])
    first = removal.targets[0]
    lineage = Lineage(
        generator=GENERATOR,
        generator_version=VERSION,
        prompt_hash=(MANY if len(removal.targets) > 1 else ONE).version,
        model="",
        seed="/".join([GENERATOR, VERSION, repo.repo_id, repo.head, first.item]),
        knobs={
            "function": first.item,
            **({"also": removal.targets[1].qualname} if len(removal.targets) > 1 else {}),
            "level": removal.level.name,
            **removal.level.knobs,
        },
    )
    reference = file_diff(path, stubbed, original)
    tests = (fail_to_pass, pass_to_pass)
    shown = {path: stubbed}
    return code_task(
        "function_rebuild",
        statement,
        shown,
        reference,
        workspace,
        tests,
        lineage,
        regions,
        max_prompt_chars,
    )


def _stub_regions(removal: Removal) -> list[tuple[int, int]]:
    """Where each removed function sits in the file with its body taken out: from its first
    line to its stub."""
    regions, removed = [], 0
    for target in sorted(removal.targets, key=lambda t: t.body_start):
        start = target.body_start
        if not removal.keep_docstring and target.doc_start is not None:
            start = target.doc_start
        regions.append((target.def_start - removed, start - removed))
        removed += target.end - start  # the body's lines became the one stub line
    return regions


def _statement(removal: Removal, sources: dict[str, str], tests: list[str]) -> str:
    path = removal.targets[0].path
    others = {p: t for p, t in sources.items() if p != path}
    sites = [site for t in removal.targets for site in call_sites(t, others)][:MAX_CALL_SITES]
    documented = removal.keep_docstring and any(t.doc_start for t in removal.targets)
    values = {
        "path": path,
        "stub": of_path(path).stub,
        "docstring": ", its docstring" if documented else "",
        "call_sites": "\n\nIt is called like this:\n" + "\n".join(sites) if sites else "",
        "tests": "\n\nThese tests must pass:\n\n" + "\n\n".join(tests) if tests else "",
    }
    if len(removal.targets) == 1:
        return ONE.render(name=removal.targets[0].qualname, **values)
    names = " and ".join(f"`{t.qualname}`" for t in removal.targets)
    return MANY.render(names=names, **values)


def make_variant(
    task: Task,
    level: Level,
    direction: Direction,
    repo: RepoAtHead,
    limits: Limits,
    max_prompt_chars: int,
) -> Task:
    """`task` at another level of the ladder (blocking: runs the tests in the sandbox); raises
    CheckFailure when the level cannot be made for it."""
    path, qualname = str(task.lineage.knobs["function"]).split("::", 1)
    sources = files_at(repo.mirror, repo.head, [path])
    found = targets(path, sources[path])
    target = next((t for t in found if t.qualname == qualname), None)
    if target is None:
        raise CheckFailure("function_not_found")
    removal = Removal((target,), level)
    if not removal.keep_docstring and target.doc_start is None:
        raise CheckFailure("no_docstring_to_drop")
    sources.update(_other_sources(repo, path))
    passing = {*task.verifier.fail_to_pass, *task.verifier.pass_to_pass}
    if level.knobs["functions"] == 1:
        variant = build(repo, removal, sources, passing, limits, max_prompt_chars)
    else:
        variant = _with_second(repo, removal, found, sources, passing, limits, max_prompt_chars)
    if isinstance(variant, CheckFailure):
        raise variant
    knobs = {k: v for k, v in task.lineage.knobs.items() if k != "also"}
    if "also" in variant.lineage.knobs:
        knobs["also"] = variant.lineage.knobs["also"]
    lineage = repaired(variant.lineage, knobs, task, level, direction, LADDER.base)
    return variant.model_copy(update={"lineage": lineage})


def _with_second(
    repo: RepoAtHead,
    removal: Removal,
    found: list[Target],
    sources: dict[str, str],
    passing: set[str],
    limits: Limits,
    max_prompt_chars: int,
) -> Task | CheckFailure:
    """`removal` with a second function of the same file that tests cover on its own."""
    target = removal.targets[0]
    others = sorted((t for t in found if t != target), key=lambda t: content_id(t.item))
    alone = LADDER.level(LADDER.base)
    for partner in others[:MAX_PARTNERS]:
        solo = build(repo, Removal((partner,), alone), sources, passing, limits, max_prompt_chars)
        if isinstance(solo, CheckFailure):
            continue  # no test notices this one missing
        pair = replace(removal, targets=(target, partner))
        return build(repo, pair, sources, passing, limits, max_prompt_chars)
    return CheckFailure("no_second_covered_function")


def _other_sources(repo: RepoAtHead, path: str) -> dict[str, str]:
    """The other source files (for call sites); unreadable ones are skipped."""
    sources = {}
    for other in source_paths(repo):
        if other != path:
            try:
                sources.update(files_at(repo.mirror, repo.head, [other]))
            except CheckFailure:
                continue
    return sources
