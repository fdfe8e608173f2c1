"""JavaScript and TypeScript source read as syntax trees, with tree-sitter's maintained grammars
(wheels for every platform, so no Node tooling runs outside the sandbox; the TypeScript grammar
extends the JavaScript one, so both give the same kinds of node). Used to find a file's
functions (`generators.function_targets`), to mutate them and to rebind them (the red team)."""

from __future__ import annotations

from functools import cache

from tree_sitter import Language, Parser, Tree

from data.runtime.languages import TypeScript

# a variable whose value is one of these is a function (`const f = function () {…}`, or `=> {…}`)
FUNCTION_VALUES = ("function_expression", "arrow_function", "generator_function")


@cache
def _parser(typed: bool) -> Parser:
    if typed:
        import tree_sitter_typescript

        return Parser(Language(tree_sitter_typescript.language_typescript()))
    import tree_sitter_javascript

    return Parser(Language(tree_sitter_javascript.language()))


def javascript_tree(source: str, path: str = "") -> Tree:
    """`source` parsed with tree-sitter's grammar for the file at `path`: TypeScript's for a
    TypeScript file, else JavaScript's."""
    return _parser(path.endswith(TypeScript.own_suffixes)).parse(source.encode())
