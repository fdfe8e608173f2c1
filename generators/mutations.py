"""Where a bug can be put into a function: mutations of one syntax node of its body, each a
replacement of that node's span of the source text only, so the rest of the file stays byte for
byte the original. Python is read with `ast`, JavaScript and TypeScript with tree-sitter's grammars.

Mutations come in two kinds: `plain` (a comparison or membership turned around, `+` for `-`,
`and` for `or` (`&&` for `||`), a `not` (`!`) dropped, `True` for `False`) and `subtle` (a
boundary moved, `<` for `<=`, or a whole number off by one). The admission's mutants of a
reference (`mutants_of_change`) may also take `coarse` ones, which bug injection never does:
a returned value replaced by nothing (`None`, `undefined`) or a statement deleted, so that a
function without an operator or a constant still has a mutant its tests are tried on.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from tree_sitter import Node

from data.lake import content_id
from data.repos import javascript_tree
from data.runtime.languages import JavaScript, of_path
from generators.function_targets import JAVASCRIPT_SUFFIXES, Target, targets

MAX_CONSTANT = 10_000  # whole numbers larger than this are left alone


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


# --- Python ----------------------------------------------------------------------------------

# the operator between two operands -> (what it becomes, whether the change is subtle)
PYTHON_SWAPS = {
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


def python_mutations(source: str, target: Target) -> list[Mutation]:
    """Every mutation of a Python `target`'s body (its docstring aside) in `source`, in source
    order."""
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
    """The operator written between `left` and `right` swapped (`PYTHON_SWAPS`), when the
    text between them is that operator alone (with brackets and spaces around it)."""
    if operator is None:
        return
    start, end = offsets.end(left), offsets.start(right)
    written = re.fullmatch(r"([\s)]*)([^\s()]+(?:\s+[^\s()]+)?)([\s(]*)", source[start:end])
    if written is None or " ".join(written.group(2).split()) != operator:
        return
    replacement, subtle = PYTHON_SWAPS[operator]
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


def python_coarse_mutations(source: str, target: Target) -> list[Mutation]:
    """A Python `target`'s coarse mutations (see above) in `source`, in source order: each
    `return` of a value made `return None`, each simple statement of its body made `pass`."""
    offsets = _LineOffsets(source)
    found: list[Mutation] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        inside = target.body_start <= line and getattr(node, "end_lineno", 0) <= target.end
        if not inside or not isinstance(node, SIMPLE_STATEMENTS) or _is_docstring(node):
            continue
        start, end = offsets.start(node), offsets.end(node)
        if isinstance(node, ast.Return) and node.value is not None:
            returned = ast.unparse(node.value)
            if returned != "None":
                description = f"`return {returned[:40]}` became `return None`"
                found.append(Mutation(target, start, end, "return None", description, False, line))
        elif not isinstance(node, (ast.Return, ast.Pass)):
            description = f"statement on line {line} deleted"
            found.append(Mutation(target, start, end, "pass", description, False, line))
    return sorted(found, key=lambda m: (m.start, m.description))


SIMPLE_STATEMENTS = (
    ast.Return,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Expr,
    ast.Raise,
    ast.Pass,
    ast.Delete,
)


def _is_docstring(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def coarse_mutations(source: str, target: Target) -> list[Mutation]:
    """`target`'s coarse mutations in `source`, by its language, the ones whose result does not
    parse left out, in a stable order."""
    if isinstance(of_path(target.path), JavaScript):
        found = javascript_coarse_mutations(source, target)
    else:
        found = python_coarse_mutations(source, target)
    kept = [m for m in found if _parses(target.path, m.apply(source))]
    return sorted(kept, key=lambda m: content_id(target.item, m.key))


def mutations(source: str, target: Target) -> list[Mutation]:
    """Every mutation of `target`'s body in `source`, in source order, by its language."""
    if isinstance(of_path(target.path), JavaScript):
        return javascript_mutations(source, target)
    return python_mutations(source, target)


def candidates(source: str, target: Target, subtle: bool) -> list[Mutation]:
    """`target`'s mutations of the kind asked for, in a stable order spread over the body, the
    ones whose result does not parse left out."""
    kept = [m for m in mutations(source, target) if m.subtle == subtle]
    kept = [m for m in kept if _parses(target.path, m.apply(source))]
    return sorted(kept, key=lambda m: content_id(target.item, m.key))


def _parses(path: str, source: str) -> bool:
    if isinstance(of_path(path), JavaScript):
        return not javascript_tree(source, path).root_node.has_error
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def mutants_of_change(
    before: dict[str, str], after: dict[str, str], most: int
) -> list[dict[str, str]]:
    """Up to `most` mutants of a change: each is `after` (path: text) with one mutation in a
    function whose lines the change touched (plain mutations first: they change behaviour far
    more often than a moved boundary does; coarse ones last, where the others are too few), in
    a stable order spread over the functions."""
    found: dict[str, list[tuple[str, Mutation]]] = {"plain": [], "subtle": [], "coarse": []}
    for path, text in sorted(after.items()):
        if not path.endswith((".py", *JAVASCRIPT_SUFFIXES)):
            continue
        try:
            changed = _changed_lines(before.get(path, ""), text)
            touched = [
                t for t in targets(path, text) if changed & set(range(t.def_start, t.end + 1))
            ]
        except SyntaxError:
            continue
        for target in touched:
            found["plain"] += [(path, m) for m in candidates(text, target, subtle=False)]
            found["subtle"] += [(path, m) for m in candidates(text, target, subtle=True)]
            found["coarse"] += [(path, m) for m in coarse_mutations(text, target)]
    picked = [m for kind in ("plain", "subtle", "coarse") for m in _spread(found[kind])][:most]
    return [{**after, path: mutation.apply(after[path])} for path, mutation in picked]


def _changed_lines(before: str, after: str) -> set[int]:
    """The lines (1-based) of `after` that are not in `before` as they stand there."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    return {
        line + 1
        for tag, _, _, start, end in matcher.get_opcodes()
        if tag != "equal"
        for line in range(start, end)
    }


def _spread(found: list[tuple[str, Mutation]]) -> list[tuple[str, Mutation]]:
    """`found` in turns: the first mutation of each function, then the second of each, ..."""
    by_function: dict[str, list[tuple[str, Mutation]]] = {}
    for path, mutation in found:
        by_function.setdefault(mutation.target.item, []).append((path, mutation))
    rounds = max(map(len, by_function.values()), default=0)
    return [group[n] for n in range(rounds) for group in by_function.values() if n < len(group)]


# --- JavaScript -------------------------------------------------------------------------------

JAVASCRIPT_SWAPS = {
    "<": ("<=", True),
    "<=": ("<", True),
    ">": (">=", True),
    ">=": (">", True),
    "===": ("!==", False),
    "!==": ("===", False),
    "==": ("!=", False),
    "!=": ("==", False),
    "+": ("-", False),
    "-": ("+", False),
    "+=": ("-=", False),
    "-=": ("+=", False),
    "&&": ("||", False),
    "||": ("&&", False),
}
OPERATOR_NODES = ("binary_expression", "augmented_assignment_expression")


def javascript_mutations(source: str, target: Target) -> list[Mutation]:
    """Every mutation of a JavaScript `target`'s body in `source`, in source order."""
    encoded = source.encode()
    found: list[Mutation] = []
    for node, first in _javascript_body_nodes(source, target):
        for start, end, replacement, description, subtle in _javascript_changes(node):
            start, end = _chars(encoded, start), _chars(encoded, end)
            found.append(Mutation(target, start, end, replacement, description, subtle, first))
    return sorted(found, key=lambda m: (m.start, m.description))


def _javascript_body_nodes(source: str, target: Target) -> Iterator[tuple[Node, int]]:
    """Each syntax node wholly inside `target`'s body, with its first line (1-based)."""
    stack = [javascript_tree(source, target.path).root_node]
    while stack:
        node = stack.pop()
        first, last = node.start_point.row + 1, node.end_point.row + 1
        if last < target.body_start or first > target.end:
            continue
        stack.extend(node.children)
        if first >= target.body_start and last <= target.end:
            yield node, first


def _javascript_changes(node: Node) -> Iterator[_Change]:
    """(start byte, end byte, replacement, description, subtle) of each change of `node`."""
    if node.type in OPERATOR_NODES:
        operator = node.child_by_field_name("operator")
        written = operator.type if operator is not None else ""
        if written in JAVASCRIPT_SWAPS:
            replacement, subtle = JAVASCRIPT_SWAPS[written]
            description = f"`{written}` became `{replacement}`"
            yield operator.start_byte, operator.end_byte, replacement, description, subtle
    elif node.type == "unary_expression":
        operator = node.child_by_field_name("operator")
        if operator is not None and operator.type == "!":
            yield operator.start_byte, operator.end_byte, "", "`!` dropped", False
    elif node.type in ("true", "false"):
        flipped = "false" if node.type == "true" else "true"
        yield node.start_byte, node.end_byte, flipped, f"`{node.type}` became `{flipped}`", False
    elif node.type == "number":
        written = node.text.decode()
        if written.isdigit() and int(written) <= MAX_CONSTANT:
            bumped = str(int(written) + 1)
            yield node.start_byte, node.end_byte, bumped, f"`{written}` became `{bumped}`", True


def javascript_coarse_mutations(source: str, target: Target) -> list[Mutation]:
    """A JavaScript `target`'s coarse mutations in `source`: each `return` of a value made
    `return undefined;`, each expression statement of its body deleted."""
    encoded = source.encode()
    found: list[Mutation] = []
    for node, first in _javascript_body_nodes(source, target):
        start, end = _chars(encoded, node.start_byte), _chars(encoded, node.end_byte)
        if node.type == "return_statement" and node.named_child_count:
            returned = node.text.decode()[:40]
            description = f"`{returned}` became `return undefined;`"
            replacement = "return undefined;"
            found.append(Mutation(target, start, end, replacement, description, False, first))
        elif node.type == "expression_statement":
            description = f"statement on line {first} deleted"
            found.append(Mutation(target, start, end, ";", description, False, first))
    return sorted(found, key=lambda m: (m.start, m.description))


def _chars(encoded: bytes, offset: int) -> int:
    """The character offset of byte `offset` of UTF-8 `encoded`."""
    return len(encoded[:offset].decode(errors="ignore"))
