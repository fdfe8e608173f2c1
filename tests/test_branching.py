"""One home per concept: code outside a registry neither branches on the names the registry owns
nor keeps a list of them, so a new family, verifier type, source type or projection needs no
edit anywhere else. For each axis the names come from its registry at test time (the families'
kinds, the verifier types' names and spec classes, the source types' names and aliases, the
projections' names), and an AST walk of every module of the layers, `families/` included, finds
each place that holds one written out, or in a module constant (followed through imports):

- a comparison with one (`==`, `!=`, `in`, `not in`, also against a constant tuple or set of
  them) or a `match` case on one;
- a scope test on one (`config.scope.makes("doc_qa")`);
- a tuple, list, set or frozenset of two or more (a `Literal[...]` among them);
- a dict keyed by two or more, most of its keys (a record of many fields two of which share a
  name with a registered one, as the lake's tables `repos` and `traces` share the source
  types', is not a list of them; `dict(a=..., b=...)` counts as a dict);
- one quoted in a string, as SQL holds it (`kind = 'doc_qa'`, `kind IN ('a', 'b')`), f-strings
  included;
- for verifier types, `isinstance` with, a `case` on, or a collection of two or more of the spec
  classes.

The registry's own modules may list their members, and a family's module may name its own kinds.
Harness names (the trainer environments) are in no registry yet: that axis lists them here and
counts comparisons and `isinstance` only (issue 42)."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

import families
from data.export import formats
from judges import verifier_types
from sources import REGISTERED as SOURCES

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("data", "harnesses", "generators", "judges", "families", "sources", "flows")
# the harness names (trainer environments): no registry holds them yet
HARNESSES = frozenset(
    {
        "closed_book",
        "open_book",
        "doc_search",
        "code_single_turn",
        "tool_replay",
        "world_tools",
        "world_actions",
        "single_turn",
    }
)


@dataclass(frozen=True)
class Axis:
    """The names a registry owns, the modules that may list them, the classes that stand for
    them, the names each module may write as its own, and whether lists of them count."""

    names: frozenset[str]
    registry: tuple[Path, ...]  # its files and folders
    classes: frozenset[str] = frozenset()
    own: dict[Path, frozenset[str]] = field(default_factory=dict)
    lists: bool = True  # False: comparisons and isinstance only


def _spec_classes() -> frozenset[str]:
    """The registered verifier types' spec classes and the bases some but not all share."""
    specs = [registered.spec for registered in verifier_types.REGISTERED]
    shared = set.intersection(*(set(spec.__mro__) for spec in specs))
    return frozenset(
        base.__name__
        for spec in specs
        for base in spec.__mro__
        if base not in shared and base.__module__ == spec.__module__
    )


def _own_kinds() -> dict[Path, frozenset[str]]:
    """Each registered family's module, with the kinds it makes."""
    own: dict[Path, frozenset[str]] = {}
    for family in families.REGISTERED:
        path = Path(inspect.getfile(type(family)))
        own[path] = own.get(path, frozenset()) | frozenset(family.kinds)
    return own


def _axes() -> dict[str, Axis]:
    return {
        "task kind": Axis(
            frozenset(families.kinds()),
            (ROOT / "families" / "__init__.py", ROOT / "families" / "base.py"),
            own=_own_kinds(),
        ),
        "verifier type": Axis(
            frozenset(registered.name for registered in verifier_types.REGISTERED),
            (ROOT / "judges" / "verifier_types", ROOT / "data" / "lake" / "records" / "specs.py"),
            classes=_spec_classes(),
        ),
        "source type": Axis(
            frozenset(name for s in SOURCES for name in (s.name, *s.aliases)),
            (ROOT / "sources",),
        ),
        "projection": Axis(frozenset(formats()), (ROOT / "data" / "export" / "projections",)),
        "harness": Axis(HARNESSES, (ROOT / "data" / "export" / "environments.py",), lists=False),
    }


class Modules:
    """The parsed modules under `root`'s layers, and the strings their module-level constants
    hold, followed through imports (`from generators.doc_qa import KIND`, `doc_qa.KIND`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: dict[str, Path] = {}
        self.trees: dict[str, ast.Module] = {}
        for layer in LAYERS:
            for path in sorted((root / layer).rglob("*.py")):
                module = self._name(path)
                self.paths[module] = path
                self.trees[module] = ast.parse(path.read_text(encoding="utf-8"))
        self.imported = {module: self._imports(module) for module in self.trees}
        self.assigned = {module: self._constants(tree) for module, tree in self.trees.items()}

    def _name(self, path: Path) -> str:
        parts = list(path.relative_to(self.root).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    def _imports(self, module: str) -> dict[str, str]:
        """local name -> what it names (`package.module`, or `package.module.NAME`)"""
        package = module if self.paths[module].name == "__init__.py" else module.rpartition(".")[0]
        found = {}
        for node in ast.walk(self.trees[module]):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    found[local] = alias.name if alias.asname else local
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    above = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*above, base] if base else above)
                for alias in node.names:
                    found[alias.asname or alias.name] = f"{base}.{alias.name}"
        return found

    @staticmethod
    def _constants(tree: ast.Module) -> dict[str, ast.expr]:
        found = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                if isinstance(node.targets[0], ast.Name):
                    found[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                found[node.target.id] = node.value or ast.Constant(None)
        return found

    def _dotted(self, module: str, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.assigned[module]:
                return f"{module}.{node.id}"
            return self.imported[module].get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._dotted(module, node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def _value(self, module: str, node: ast.expr) -> tuple[str, ast.expr]:
        """`node`, or the value of the module constant it names (followed through imports)."""
        for _ in range(8):
            owner, _, name = (self._dotted(module, node) or "").rpartition(".")
            if name not in self.assigned.get(owner, {}):
                break
            module, node = owner, self.assigned[owner][name]
        return module, node

    def string(self, module: str, node: ast.expr) -> str | None:
        """The string `node` holds, written out or in a constant; None where it holds none."""
        _, node = self._value(module, node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        return None

    def strings(self, module: str, node: ast.expr) -> set[str]:
        """The strings `node` holds: one (`string`), or a collection's, written out or in a
        constant (a tuple, list or set, `set(...)` or `frozenset(...)` of them)."""
        module, node = self._value(module, node)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in {"set", "frozenset"}:
            return {s for arg in node.args for s in self.strings(module, arg)}
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return {s for e in node.elts if (s := self.string(module, e)) is not None}
        found = self.string(module, node)
        return {found} if found is not None else set()


@cache
def _product() -> Modules:
    return Modules(ROOT)


def _texts(tree: ast.Module) -> Iterator[ast.Constant | ast.JoinedStr]:
    """Every string of the module but its docstrings (and other bare strings)."""
    bare = {
        id(inside)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant | ast.JoinedStr)
        for inside in ast.walk(node.value)
    }
    for node in ast.walk(tree):
        text = isinstance(node, ast.JoinedStr) or isinstance(getattr(node, "value", 0), str)
        if isinstance(node, ast.Constant | ast.JoinedStr) and text and id(node) not in bare:
            yield node


def offences(modules: Modules, module: str, axis: Axis) -> list[str]:
    """`path:line: form` for each place in `module` that branches on or lists a name of `axis`."""
    tree, path = modules.trees[module], modules.paths[module]
    names = axis.names - axis.own.get(path, frozenset())
    found: list[str] = []

    def note(node: ast.AST, form: str) -> None:
        found.append(f"{path.relative_to(modules.root)}:{getattr(node, 'lineno', 0)}: {form}")

    def one(node: ast.expr | None) -> bool:
        return node is not None and modules.string(module, node) in names

    def count(nodes: list[ast.expr | None]) -> int:
        return sum(one(n) for n in nodes)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
            used = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            if used & axis.classes:
                note(node, "isinstance on a class that stands for one")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(modules.strings(module, side) & names for side in sides):
                note(node, "comparison")
        elif isinstance(node, ast.MatchValue) and modules.strings(module, node.value) & names:
            note(node, "match case")
        elif isinstance(node, ast.MatchClass) and getattr(node.cls, "id", "") in axis.classes:
            note(node, "match case on a class that stands for one")
        elif not axis.lists:
            continue
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "makes":
            if count(node.args):
                note(node, "scope test")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "dict":
            keys = [k.arg for k in node.keywords]
            if sum(k in names for k in keys) >= max(2, len(keys) / 2):
                note(node, "dict keyed by them")
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            if count(node.elts) >= 2:
                note(node, "collection of them")
            elif sum(getattr(e, "id", "") in axis.classes for e in node.elts) >= 2:
                note(node, "collection of classes that stand for them")
        elif isinstance(node, ast.Dict) and count(node.keys) >= max(2, len(node.keys) / 2):
            note(node, "dict keyed by them")
    if axis.lists and names:
        quoted = re.compile("'(?:" + "|".join(re.escape(n) for n in sorted(names)) + ")'")
        for text in _texts(tree):
            parts = text.values if isinstance(text, ast.JoinedStr) else [text]
            written = "".join(
                part.value
                if isinstance(part, ast.Constant)
                else modules.string(module, part.value) or "{}"
                for part in parts
                if isinstance(part, ast.Constant | ast.FormattedValue)
            )
            if quoted.search(written):
                note(text, "quoted in a string (SQL)")
    return sorted(set(found), key=lambda line: (line.split(":")[0], int(line.split(":")[1])))


def _outside(modules: Modules, axis: Axis) -> Iterator[str]:
    for module, path in modules.paths.items():
        if not any(path == home or home in path.parents for home in axis.registry):
            yield module


@pytest.mark.parametrize("axis", list(_axes()))
def test_no_module_outside_a_registry_branches_on_or_lists_its_names(axis):
    modules, chosen = _product(), _axes()[axis]
    found = [line for m in _outside(modules, chosen) for line in offences(modules, m, chosen)]
    assert not found, f"{axis} names outside its registry (ask the registry):\n" + "\n".join(found)


def test_each_axis_holds_its_registrys_names():
    axes = _axes()
    assert all(len(axis.names) >= 2 for axis in axes.values()), axes
    specs = {registered.spec.__name__ for registered in verifier_types.REGISTERED}
    assert specs < axes["verifier type"].classes  # and the bases some share (`AnswerSpec`)
    for family in families.REGISTERED:
        assert set(family.kinds) <= axes["task kind"].own[Path(inspect.getfile(type(family)))]


# each form, in a module of a sandbox tree: (file, source, the forms found)
FORMS = {
    "tuple": ("KINDS = ('doc_qa', 'bug_fix')\n", ["collection of them"]),
    "list": ("KINDS = ['doc_qa', 'bug_fix']\n", ["collection of them"]),
    "set": ("KINDS = {'doc_qa', 'bug_fix'}\n", ["collection of them"]),
    "frozenset": ("KINDS = frozenset({'doc_qa', 'bug_fix'})\n", ["collection of them"]),
    "literal": (
        "from typing import Literal\nKind = Literal['doc_qa', 'bug_fix']\n",
        ["collection of them"],
    ),
    "constants": (
        "from generators.kinds import A\nfrom generators import kinds\nBOTH = (A, kinds.B)\n",
        ["collection of them"],
    ),
    "dict": ("COST = {'doc_qa': 1, 'bug_fix': 2}\n", ["dict keyed by them"]),
    "dict call": ("COST = dict(doc_qa=1, bug_fix=2)\n", ["dict keyed by them"]),
    "equals": ("def f(t):\n    return t.kind == 'doc_qa'\n", ["comparison"]),
    "not equal": ("def f(t):\n    return t.kind != 'doc_qa'\n", ["comparison"]),
    "in": ("def f(t):\n    return t.kind in ('doc_qa', 'x')\n", ["comparison"]),
    "in a constant": (
        "from generators.kinds import BOTH\ndef f(t):\n    return t.kind in BOTH\n",
        ["comparison"],
    ),
    "match": (
        "def f(t):\n    match t.kind:\n        case 'doc_qa':\n            return 1\n",
        ["match case"],
    ),
    "scope": ("def f(ctx):\n    return ctx.config.scope.makes('doc_qa')\n", ["scope test"]),
    "sql": ("SQL = \"SELECT * FROM tasks WHERE kind = 'doc_qa'\"\n", ["quoted in a string (SQL)"]),
    "sql in": (
        "SQL = \"SELECT * FROM tasks WHERE kind IN ('x', 'bug_fix')\"\n",
        ["quoted in a string (SQL)"],
    ),
    "sql f-string": (
        "from generators.kinds import A\nSQL = f\"SELECT * FROM tasks WHERE kind = '{A}'\"\n",
        ["quoted in a string (SQL)"],
    ),
    "isinstance": (
        "def f(t):\n    return isinstance(t.verifier, RubricSpec)\n",
        ["isinstance on a class that stands for one"],
    ),
    "classes": (
        "GRADED = (RubricSpec, AnswerSpec)\n",
        ["collection of classes that stand for them"],
    ),
    "match class": (
        "def f(t):\n    match t.verifier:\n        case RubricSpec():\n            return 1\n",
        ["match case on a class that stands for one"],
    ),
    # not lists: a name alone (a generator's kind), a record of fields, a docstring
    "one name": ("KIND = 'doc_qa'\nKINDS = ('doc_qa',)\n", []),
    "fields": ("ROW = {'doc_qa': 1, 'a': 2, 'b': 3, 'c': 4, 'd': 5}\n", []),
    "docstring": ('def f():\n    """kind = \'doc_qa\'"""\n', []),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_each_form_of_a_hand_kept_list_is_found(tmp_path, form):
    source, expected = FORMS[form]
    (tmp_path / "generators").mkdir()
    (tmp_path / "generators" / "kinds.py").write_text("A = 'doc_qa'\nB = 'bug_fix'\nBOTH = (A,)\n")
    (tmp_path / "families").mkdir()
    (tmp_path / "families" / "module.py").write_text(source)
    axis = Axis(
        frozenset({"doc_qa", "bug_fix"}),
        (tmp_path / "generators",),
        classes=frozenset({"RubricSpec", "AnswerSpec"}),
    )
    found = offences(Modules(tmp_path), "families.module", axis)
    assert [line.split(": ", 1)[1] for line in found] == expected, found


def test_a_family_names_its_own_kinds_and_the_harness_axis_counts_no_lists(tmp_path):
    (tmp_path / "families").mkdir()
    own = tmp_path / "families" / "mine.py"
    own.write_text("class Mine:\n    kinds = ('doc_qa', 'bug_fix')\n")
    other = tmp_path / "families" / "other.py"
    other.write_text("KINDS = ('doc_qa', 'bug_fix')\n")
    kinds = frozenset({"doc_qa", "bug_fix"})
    axis = Axis(kinds, (), own={own: kinds})
    modules = Modules(tmp_path)
    assert offences(modules, "families.mine", axis) == []
    assert offences(modules, "families.other", axis) == ["families/other.py:1: collection of them"]
    harness = Axis(kinds, (), lists=False)
    assert offences(modules, "families.other", harness) == []
