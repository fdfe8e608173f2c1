"""The functions of a source file whose body a code task can take out or change: top-level
functions and the methods of top-level classes, with the lines their definition, docstring and
body span. Python is read with `ast`; JavaScript and TypeScript with tree-sitter's grammars (a
maintained parser with wheels for every platform, so no Node tooling runs outside the sandbox;
the TypeScript grammar extends the JavaScript one, so both give the same kinds of node).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from tree_sitter import Node

from data.repos import FUNCTION_VALUES, javascript_tree
from data.runtime.languages import JavaScript, TypeScript

JAVASCRIPT_SUFFIXES = (*JavaScript.own_suffixes, *TypeScript.own_suffixes)  # tree-sitter's


@dataclass(frozen=True)
class Target:
    """A function whose body can be taken out (line numbers 1-based, inclusive)."""

    path: str
    qualname: str
    name: str
    is_method: bool
    def_start: int  # the first line of its definition (decorators included)
    doc_start: int | None  # the docstring's first line, if it has one inside the body
    body_start: int  # the first statement after the docstring
    end: int  # the body's last line
    indent: str

    @property
    def item(self) -> str:
        return f"{self.path}::{self.qualname}"


def targets(path: str, source: str) -> list[Target]:
    """The functions of `source` (the file at `path`) with a body worth taking out: more than a
    placeholder, on lines of its own. Raises SyntaxError where the file does not parse."""
    if path.endswith(JAVASCRIPT_SUFFIXES):
        return javascript_targets(path, source)
    return python_targets(path, source)


# --- Python -----------------------------------------------------------------------------------


def python_targets(path: str, source: str) -> list[Target]:
    """Top-level functions and methods of `source` with a body worth rebuilding (not a bare
    `pass`, `...` or `raise`, and not on the `def` line)."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(_python_target(path, source, node, ""))
        elif isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    found.append(_python_target(path, source, child, node.name))
    return [t for t in found if t is not None]


def _python_target(
    path: str, source: str, node: ast.FunctionDef | ast.AsyncFunctionDef, owner: str
) -> Target | None:
    has_doc = ast.get_docstring(node, clean=False) is not None
    rest = node.body[1:] if has_doc else node.body
    if not rest or node.body[0].lineno == node.lineno or node.end_lineno is None:
        return None
    if len(rest) == 1 and _is_placeholder(rest[0]):
        return None
    line = source.splitlines()[rest[0].lineno - 1]
    return Target(
        path=path,
        qualname=f"{owner}.{node.name}" if owner else node.name,
        name=node.name,
        is_method=bool(owner),
        def_start=min([node.lineno, *(d.lineno for d in node.decorator_list)]),
        doc_start=node.body[0].lineno if has_doc else None,
        body_start=rest[0].lineno,
        end=node.end_lineno,
        indent=line[: len(line) - len(line.lstrip())],
    )


def _is_placeholder(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Pass | ast.Raise):
        return True
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


# --- JavaScript -------------------------------------------------------------------------------


def javascript_targets(path: str, source: str) -> list[Target]:
    """Function declarations (exported or not), functions bound to a `const`/`let`/`var` and
    the methods of classes, at the top level of `source`, whose `{…}` body has statements on
    lines of their own (an arrow function with an expression body has none). Its JSDoc
    comment sits before the definition, not in the body, so `doc_start` stays None."""
    tree = javascript_tree(source, path)
    if tree.root_node.has_error:
        raise SyntaxError(f"{path}: not JavaScript or TypeScript the parser reads")
    lines = source.splitlines()
    found: list[Target] = []
    for statement in tree.root_node.named_children:
        for name, owner, outer, function in _declared_functions(statement):
            target = _javascript_target(path, lines, name, owner, outer, function)
            found += [target] if target else []
    return found


def _declared_functions(statement: Node, outer: Node | None = None):
    """(name, owning class, outermost node, function node) of each function `statement`
    declares."""
    outer = outer or statement
    kind = statement.type
    if kind == "export_statement":
        inner = statement.child_by_field_name("declaration") or next(
            (c for c in statement.named_children if c.type in ("function_declaration", "class")),
            None,
        )
        if inner is not None:
            yield from _declared_functions(inner, statement)
    elif kind in ("function_declaration", "generator_function_declaration"):
        yield _text(statement.child_by_field_name("name")), "", outer, statement
    elif kind in ("lexical_declaration", "variable_declaration"):
        for declarator in statement.named_children:
            value = declarator.child_by_field_name("value")
            if declarator.type == "variable_declarator" and value and value.type in FUNCTION_VALUES:
                yield _text(declarator.child_by_field_name("name")), "", outer, value
    elif kind in ("class_declaration", "class"):
        named = statement.child_by_field_name("name")
        owner = _text(named) if named else "default"
        for member in statement.child_by_field_name("body").named_children:
            if member.type == "method_definition":
                yield _text(member.child_by_field_name("name")), owner, member, member


def _javascript_target(
    path: str, lines: list[str], name: str, owner: str, outer: Node, function: Node
) -> Target | None:
    body = function.child_by_field_name("body")
    if body is None or body.type != "statement_block":
        return None
    statements = [c for c in body.named_children if c.type != "comment"]
    if not statements or (len(statements) == 1 and statements[0].type == "throw_statement"):
        return None  # nothing, or a placeholder
    first, last = statements[0].start_point.row, statements[-1].end_point.row
    if first == body.start_point.row or last == body.end_point.row:
        return None  # a statement shares a line with a brace: no lines of its own to replace
    line = lines[first]
    return Target(
        path=path,
        qualname=f"{owner}.{name}" if owner else name,
        name=name,
        is_method=bool(owner),
        def_start=outer.start_point.row + 1,
        doc_start=None,
        body_start=first + 1,
        end=last + 1,
        indent=line[: len(line) - len(line.lstrip())],
    )


def _text(node: Node) -> str:
    return node.text.decode()
