"""Bug-fix tasks: a bug put into a function the tests cover; the tests it breaks must pass again.

For repositories whose history has no commits that carry tests (nothing to replay), in the
spirit of SWE-smith. A mutation changes one syntax node of a function's body, located with
`ast` and replaced in the source text over that node's span only, so the rest of the file is
byte for byte the original. It is kept only when some of the tests that pass at HEAD now fail
(its fail-to-pass tests) and the run still ends (a mutation that hangs the suite is dropped);
every other passing test must keep passing. The known end state is the original file.

Mutations come in two kinds: `plain` (a comparison or membership turned around, `+` for `-`,
`and` for `or`, a `not` dropped, `True` for `False`) and `subtle` (a boundary moved, `<` for
`<=`, or a whole number off by one).

Difficulty ladder (easiest first): `output_shown` shows the first failing test's output;
`base` names the failing tests only; `subtle` makes a subtle mutation; `two_functions` makes
a subtle mutation in a second covered function of the same file as well.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

from data.prompts import load_prompt
from data.records import Direction, Lineage, Task, Workspace, content_id
from generators.checks import CheckFailure
from generators.code_tasks import code_task, files_at
from generators.function_rebuild import Rejected, RepoAtHead, functions_at_head, passing_at_head
from generators.function_targets import Target, targets
from generators.knobs import Ladder, Level, repaired
from harnesses.edits import file_diff
from harnesses.sandbox import Limits
from harnesses.test_run import TestRun
from harnesses.workspace import try_edits

GENERATOR = "bug_injection"
VERSION = "1"
KIND = "bug_fix"
STATEMENT = load_prompt(__file__, "bug_injection_statement")
MAX_TRIES = 4  # mutations tried per function before it is given up
MAX_LISTED = 8  # failing tests named in the statement
MAX_OUTPUT_CHARS = 2_400  # of the failing test's output, where shown
MAX_PARTNERS = 3  # second functions tried for `two_functions`
MAX_CONSTANT = 10_000  # whole numbers larger than this are left alone

LADDER = Ladder(
    levels=(
        Level("output_shown", {"subtlety": "plain", "output": "shown", "functions": 1}),
        Level("base", {"subtlety": "plain", "output": "hidden", "functions": 1}),
        Level("subtle", {"subtlety": "subtle", "output": "hidden", "functions": 1}),
        Level("two_functions", {"subtlety": "subtle", "output": "hidden", "functions": 2}),
    ),
    base="base",
)

# the operator between two operands -> (what it becomes, whether the change is subtle)
OPERATOR_SWAPS = {
    "<": ("<=", True),
    "<=": ("<", True),
    ">": (">=", True),
    ">=": (">", True),
    "==": ("!=", False),
    "!=": ("==", False),
    "in": ("not in", False),
    "not in": ("in", False),
    "is": ("is not", False),
    "is not": ("is", False),
    "+": ("-", False),
    "-": ("+", False),
    "+=": ("-=", False),
    "-=": ("+=", False),
    "and": ("or", False),
    "or": ("and", False),
}
COMPARISONS = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
}
ARITHMETIC = {ast.Add: "+", ast.Sub: "-"}
BOOLEAN = {ast.And: "and", ast.Or: "or"}


@dataclass(frozen=True)
class Mutation:
    """One change to a function's source: `start`..`end` (character offsets into the file)
    become `replacement`. `line` is the changed node's first line (1-based)."""

    target: Target
    start: int
    end: int
    replacement: str
    description: str  # e.g. `<= became <`
    subtle: bool
    line: int

    @property
    def key(self) -> str:
        """Names the mutation within its file: where it is and what it does."""
        return f"{self.target.qualname}:{self.line}:{self.start}:{self.description}"

    def apply(self, source: str) -> str:
        return source[: self.start] + self.replacement + source[self.end :]


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


def mutations(source: str, target: Target) -> list[Mutation]:
    """Every mutation of `target`'s body (its docstring aside) in `source`, in source order."""
    offsets = _LineOffsets(source)
    found: list[Mutation] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if not (target.body_start <= line and getattr(node, "end_lineno", 0) <= target.end):
            continue
        for start, end, replacement, description, subtle in _node_mutations(node, source, offsets):
            found.append(Mutation(target, start, end, replacement, description, subtle, line))
    return sorted(found, key=lambda m: (m.start, m.description))


class _LineOffsets:
    """Character offsets of `ast` positions (line 1-based, column in UTF-8 bytes)."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for text in self.lines:
            self.starts.append(self.starts[-1] + len(text))

    def at(self, line: int, column: int) -> int:
        text = self.lines[line - 1].encode()[:column].decode(errors="ignore")
        return self.starts[line - 1] + len(text)

    def start(self, node: ast.AST) -> int:
        return self.at(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.at(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]


_Change = tuple[int, int, str, str, bool]  # start, end, replacement, description, subtle


def _node_mutations(node: ast.AST, source: str, offsets: _LineOffsets) -> Iterator[_Change]:
    if isinstance(node, ast.Compare):
        lefts = [node.left, *node.comparators[:-1]]
        for op, left, right in zip(node.ops, lefts, node.comparators, strict=True):
            yield from _swap_between(left, right, COMPARISONS.get(type(op)), source, offsets)
    elif isinstance(node, ast.BinOp):
        operator = ARITHMETIC.get(type(node.op))
        yield from _swap_between(node.left, node.right, operator, source, offsets)
    elif isinstance(node, ast.AugAssign) and type(node.op) in ARITHMETIC:
        operator = ARITHMETIC[type(node.op)] + "="
        yield from _swap_between(node.target, node.value, operator, source, offsets)
    elif isinstance(node, ast.BoolOp):
        for left, right in zip(node.values, node.values[1:], strict=False):
            yield from _swap_between(left, right, BOOLEAN[type(node.op)], source, offsets)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        start, operand = offsets.start(node), offsets.start(node.operand)
        kept = re.fullmatch(r"not\s*(\(*\s*)", source[start:operand])
        if kept:
            yield start, operand, kept.group(1), "`not` dropped", False
    elif isinstance(node, ast.Constant):
        yield from _constant(node, source, offsets)


def _swap_between(
    left: ast.AST, right: ast.AST, operator: str | None, source: str, offsets: _LineOffsets
) -> Iterator[_Change]:
    """The operator written between `left` and `right` swapped (`OPERATOR_SWAPS`), when the
    text between them is that operator alone (with brackets and spaces around it)."""
    if operator is None:
        return
    start, end = offsets.end(left), offsets.start(right)
    written = re.fullmatch(r"([\s)]*)([^\s()]+(?:\s+[^\s()]+)?)([\s(]*)", source[start:end])
    if written is None or " ".join(written.group(2).split()) != operator:
        return
    replacement, subtle = OPERATOR_SWAPS[operator]
    text = written.group(1) + replacement + written.group(3)
    yield start, end, text, f"`{operator}` became `{replacement}`", subtle


def _constant(node: ast.Constant, source: str, offsets: _LineOffsets) -> Iterator[_Change]:
    start, end = offsets.start(node), offsets.end(node)
    written = source[start:end]
    if isinstance(node.value, bool) and written in ("True", "False"):
        flipped = "False" if node.value else "True"
        yield start, end, flipped, f"`{written}` became `{flipped}`", False
    elif type(node.value) is int and written.isdigit() and node.value <= MAX_CONSTANT:
        bumped = str(node.value + 1)
        yield start, end, bumped, f"`{written}` became `{bumped}`", True


def candidates(source: str, target: Target, subtle: bool) -> list[Mutation]:
    """`target`'s mutations of the kind asked for, in a stable order spread over the body, the
    ones whose result does not parse left out."""
    kept = []
    for mutation in mutations(source, target):
        if mutation.subtle != subtle:
            continue
        try:
            ast.parse(mutation.apply(source))
        except SyntaxError:
            continue
        kept.append(mutation)
    return sorted(kept, key=lambda m: content_id(target.item, m.key))


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
    """pytest's report of the failures (its FAILURES section, sandbox paths made relative),
    cut to MAX_OUTPUT_CHARS."""
    text = run.completed.stdout
    found = re.search(r"^=+ FAILURES =+$(.*?)(?=^=+ short test summary|\Z)", text, re.M | re.S)
    report = found.group(1).strip() if found else ""
    for arg in run.completed.argv:
        if arg.startswith("--rootdir="):
            report = report.replace(arg.removeprefix("--rootdir=") + "/", "")
    if len(report) > MAX_OUTPUT_CHARS:
        report = report[:MAX_OUTPUT_CHARS].rstrip() + "\n[... cut]"
    return report


def inject_tasks(
    repo: RepoAtHead, limits: Limits, max_bugs: int, max_prompt_chars: int
) -> Iterator[Task | Rejected]:
    """Bug-fix tasks of `repo` at its HEAD, at the ladder's base level: up to `max_bugs`
    functions with a plain mutation site (in a stable order spread over the files), each with
    the first of its mutations that breaks a test. Raises CheckFailure("tests_do_not_run")
    when no test passes at HEAD, CheckFailure("unsupported_language") for a repository not in
    Python (its mutations are Python's)."""
    if repo.language.name != "python":
        raise CheckFailure("unsupported_language")
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
        output = f"\n\nWhat pytest reports:\n\n```text\n{broken.output}\n```"
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
