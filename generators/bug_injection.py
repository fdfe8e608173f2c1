"""Bug-fix tasks: a bug put into a function the tests cover; the tests it breaks must pass again.

For repositories whose history has no commits that carry tests (nothing to replay), in the
spirit of SWE-smith, in Python and JavaScript alike. A mutation changes one syntax node of a
function's body, over that node's span of the text only (`generators.mutations`: plain or
subtle). It is kept only when some of the tests that pass at HEAD now fail (its fail-to-pass
tests) and the run still ends (a mutation that hangs the suite is dropped); every other passing
test must keep passing. The known end state is the original file.

Difficulty ladder (easiest first): `output_shown` shows the first failing test's output;
`base` names the failing tests only; `subtle` makes a subtle mutation; `two_functions` makes
a subtle mutation in a second covered function of the same file as well.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from data.lake import Direction, Lineage, Task, Workspace, content_id
from data.prompts import load_prompt
from data.runtime.edits import file_diff
from data.runtime.sandbox import Limits
from data.runtime.test_run import TestRun
from generators.checks import CheckFailure
from generators.code_tasks import code_task, files_at
from generators.function_rebuild import Rejected, RepoAtHead, functions_at_head, passing_at_head
from generators.function_targets import Target, targets
from generators.knobs import Ladder, Level, repaired
from generators.mutations import Mutation, candidates
from harnesses.workspace import try_edits

GENERATOR = "bug_injection"
VERSION = "1"
KIND = "bug_fix"
STATEMENT = load_prompt(__file__, "bug_injection_statement")
MAX_TRIES = 4  # mutations tried per function before it is given up
MAX_LISTED = 8  # failing tests named in the statement
MAX_OUTPUT_CHARS = 2_400  # of the failing test's output, where shown
MAX_PARTNERS = 3  # second functions tried for `two_functions`

PYTEST_FAILURES = r"^=+ FAILURES =+$(.*?)(?=^=+ short test summary|\Z)"
NODE_FAILURES = r"^✖ failing tests:$(.*?)(?=^✔|\Z)"
SANDBOX_TREE = r"/\S*?/sandbox-[^/\s]+/tree/"  # where a sandbox's copy of the tree was
# how long a test took, after its name in Node's spec reporter ("✖ adds (2.274133ms)"): it
# differs from run to run, so a task quoting it would get another id in a re-run
NODE_DURATION = r"^(\s*[✖✔﹣▶] .*?) \(\d+(?:\.\d+)?m?s\)$"

LADDER = Ladder(
    levels=(
        Level("output_shown", {"subtlety": "plain", "output": "shown", "functions": 1}),
        Level("base", {"subtlety": "plain", "output": "hidden", "functions": 1}),
        Level("subtle", {"subtlety": "subtle", "output": "hidden", "functions": 1}),
        Level("two_functions", {"subtlety": "subtle", "output": "hidden", "functions": 2}),
    ),
    base="base",
)


@dataclass(frozen=True)
class Injection:
    """The mutations a task makes (one per function, all in one file) and its level."""

    mutations: tuple[Mutation, ...]
    level: Level

    @property
    def path(self) -> str:
        return self.mutations[0].target.path

    @property
    def show_output(self) -> bool:
        return self.level.knobs["output"] == "shown"

    def mutated(self, original: str) -> str:
        """`original` with every mutation applied (from the end of the file, so that the
        earlier ones' offsets still hold)."""
        for mutation in sorted(self.mutations, key=lambda m: -m.start):
            original = mutation.apply(original)
        return original


@dataclass(frozen=True)
class Head:
    """A repository at HEAD as bug injection works on it: its source files, the tests passing
    there, the sandbox's limits and the prompt's budget."""

    repo: RepoAtHead
    sources: dict[str, str]
    passing: set[str]
    limits: Limits
    max_prompt_chars: int


@dataclass(frozen=True)
class Broken:
    """A mutated file's test run: the tests it breaks, the ones still passing and the output."""

    fail_to_pass: list[str]
    pass_to_pass: list[str]
    output: str


def broken_by(head: Head, path: str, mutated: str) -> Broken | CheckFailure:
    """Run the suite with `path` changed to `mutated`: the tests passing at HEAD that now
    fail, or why the change cannot be a task (`mutation_survives`, `mutation_hangs`)."""
    run = try_edits(head.repo.mirror, _workspace(head, path, mutated), None, [], head.limits).run
    if run is None or run.incomplete or run.tampered or run.completed.timed_out:
        return CheckFailure("mutation_hangs")
    still = run.passed()
    fail_to_pass = sorted(head.passing - still)
    if not fail_to_pass:
        return CheckFailure("mutation_survives")
    return Broken(fail_to_pass, sorted(head.passing & still), failure_output(run))


def _workspace(head: Head, path: str, mutated: str) -> Workspace:
    """The task's start: HEAD with `path` mutated."""
    repo = head.repo
    start_patch = file_diff(path, head.sources[path], mutated)
    return Workspace(
        repo_id=repo.repo_id, origin=repo.origin, base=repo.head, start_patch=start_patch
    )


def failure_output(run: TestRun) -> str:
    """The runner's report of the failures (pytest's FAILURES section, or the failing tests
    Node's spec reporter lists, without each test's duration), sandbox paths made relative, cut
    to MAX_OUTPUT_CHARS: the same failures read the same on every run."""
    completed = run.completed
    pytest = re.search(PYTEST_FAILURES, completed.stdout, re.M | re.S)
    node = re.findall(NODE_FAILURES, completed.stderr, re.M | re.S)
    report = pytest.group(1).strip() if pytest else "\n\n".join(f.strip() for f in node)
    report = re.sub(SANDBOX_TREE, "", report)
    report = re.sub(NODE_DURATION, r"\1", report, flags=re.M)
    if len(report) > MAX_OUTPUT_CHARS:
        report = report[:MAX_OUTPUT_CHARS].rstrip() + "\n[... cut]"
    return report


def inject_tasks(
    repo: RepoAtHead, limits: Limits, max_bugs: int, max_prompt_chars: int
) -> Iterator[Task | Rejected]:
    """Bug-fix tasks of `repo` at its HEAD, at the ladder's base level: up to `max_bugs`
    functions with a plain mutation site (in a stable order spread over the files), each with
    the first of its mutations that breaks a test. Raises CheckFailure("tests_do_not_run")
    when no test passes at HEAD."""
    read = functions_at_head(repo)
    yield from read.unreadable
    head = Head(repo, read.sources, passing_at_head(repo, limits), limits, max_prompt_chars)
    functions = sorted(read.functions, key=lambda t: content_id(repo.repo_id, GENERATOR, t.item))
    with_sites = [t for t in functions if candidates(read.sources[t.path], t, subtle=False)]
    base = LADDER.level(LADDER.base)
    for target in with_sites[:max_bugs]:
        result = inject(head, target, base)
        yield Rejected(target.item, result.reason) if isinstance(result, CheckFailure) else result


def inject(
    head: Head, target: Target, level: Level, taken: frozenset[str] = frozenset()
) -> Task | CheckFailure:
    """The task that puts a bug of `level`'s subtlety into `target`: its first candidate
    mutation (those in `taken` aside) that breaks a test (`no_mutation_site` when it has
    none of that kind, `mutation_survives` when no tried one breaks a test)."""
    found = _breaking(head, target, level, taken)
    if isinstance(found, CheckFailure):
        return found
    mutation, broken = found
    if level.knobs["functions"] == 1:
        return build(head, Injection((mutation,), level), broken)
    return _with_second(head, mutation, level)


def _breaking(
    head: Head, target: Target, level: Level, taken: frozenset[str] = frozenset()
) -> tuple[Mutation, Broken] | CheckFailure:
    """`target`'s first candidate mutation at `level`'s subtlety that breaks a test, and what
    it breaks; at most MAX_TRIES are tried."""
    original = head.sources[target.path]
    subtle = level.knobs["subtlety"] == "subtle"
    tried = [m for m in candidates(original, target, subtle) if m.key not in taken]
    if not tried:
        return CheckFailure("no_mutation_site")
    reason = "mutation_survives"
    for mutation in tried[:MAX_TRIES]:
        broken = broken_by(head, target.path, mutation.apply(original))
        if not isinstance(broken, CheckFailure):
            return mutation, broken
        reason = broken.reason if reason == "mutation_survives" else reason
    return CheckFailure(reason)


def _with_second(head: Head, first: Mutation, level: Level) -> Task | CheckFailure:
    """`first` with a breaking mutation of a second function of the same file."""
    path = first.target.path
    others = [t for t in targets(path, head.sources[path]) if t.qualname != first.target.qualname]
    others.sort(key=lambda t: content_id(t.item))
    for partner in others[:MAX_PARTNERS]:
        found = _breaking(head, partner, level)
        if isinstance(found, CheckFailure):
            continue
        injection = Injection((first, found[0]), level)
        broken = broken_by(head, path, injection.mutated(head.sources[path]))
        if isinstance(broken, CheckFailure):
            return broken
        return build(head, injection, broken)
    return CheckFailure("no_second_covered_function")


def build(head: Head, injection: Injection, broken: Broken) -> Task:
    """The task that repairs `injection`'s mutations, which break `broken`'s tests."""
    repo, path = head.repo, injection.path
    original = head.sources[path]
    mutated = injection.mutated(original)
    first, *rest = injection.mutations
    lineage = Lineage(
        generator=GENERATOR,
        generator_version=VERSION,
        prompt_hash=STATEMENT.version,
        model="",
        seed="/".join([GENERATOR, VERSION, repo.repo_id, repo.head, first.target.item, first.key]),
        knobs={
            "function": first.target.item,
            "mutation": first.key,
            **({"also": rest[0].target.qualname, "also_mutation": rest[0].key} if rest else {}),
            "level": injection.level.name,
            **injection.level.knobs,
        },
    )
    regions = {path: sorted(_changed_lines(original, m) for m in injection.mutations)}
    return code_task(
        KIND,
        _statement(injection, broken),
        {path: mutated},
        file_diff(path, mutated, original),
        _workspace(head, path, mutated),
        (broken.fail_to_pass, broken.pass_to_pass),
        lineage,
        regions,
        head.max_prompt_chars,
    )


def _changed_lines(original: str, mutation: Mutation) -> tuple[int, int]:
    first = original.count("\n", 0, mutation.start) + 1
    return first, first + original.count("\n", mutation.start, mutation.end)


def _statement(injection: Injection, broken: Broken) -> str:
    failing = broken.fail_to_pass
    listed = "\n".join(f"- `{test}`" for test in failing[:MAX_LISTED])
    if len(failing) > MAX_LISTED:
        listed += f"\n- and {len(failing) - MAX_LISTED} more"
    two = len(injection.mutations) > 1
    output = ""
    if injection.show_output and broken.output:
        output = f"\n\nWhat the tests report:\n\n```text\n{broken.output}\n```"
    return STATEMENT.render(
        failing=listed,
        bugs="two bugs, in two different functions," if two else "a bug",
        path=injection.path,
        output=output,
    )


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
    variant = remake(task, level, repo, limits, max_prompt_chars)
    knobs = {k: v for k, v in variant.lineage.knobs.items() if k != "level"}
    lineage = repaired(variant.lineage, knobs, task, level, direction, LADDER.base)
    return variant.model_copy(update={"lineage": lineage})


def remake(
    task: Task,
    level: Level,
    repo: RepoAtHead,
    limits: Limits,
    max_prompt_chars: int,
    taken: frozenset[str] = frozenset(),
) -> Task:
    """A new bug in `task`'s function at `level` (its mutations in `taken` aside); raises
    CheckFailure when none can be made."""
    path, qualname = str(task.lineage.knobs["function"]).split("::", 1)
    sources = files_at(repo.mirror, repo.head, [path])
    target = next((t for t in targets(path, sources[path]) if t.qualname == qualname), None)
    if target is None:
        raise CheckFailure("function_not_found")
    passing = {*task.verifier.fail_to_pass, *task.verifier.pass_to_pass}
    made = inject(Head(repo, sources, passing, limits, max_prompt_chars), target, level, taken)
    if isinstance(made, CheckFailure):
        raise made
    return made
