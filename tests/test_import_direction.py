"""The layering rule of `docs/architecture.md`: arrows point down only, and a room is entered
only from where it says.

`data/` imports no other layer; `harnesses/` only `data`; `generators/` and `judges/` only
`harnesses` and `data` (a generator never a judge, a judge never a generator); `families/` any
layer but `sources` and `flows`; `sources/` the families, harnesses and data; only `flows/`
imports `prefect`. The training room (the trainer, its
environments, episodes and warm start) is imported by itself and `flows/` alone. The runtime room
(`data/runtime/`, shipped whole in exported packages) imports nothing of ours outside itself.
Every import counts: top-level ones, ones inside functions and ones under `if TYPE_CHECKING:`.
And no module of a layer is over 500 lines: past that, it holds more than one concept.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("data", "harnesses", "generators", "judges", "families", "sources", "flows")
MAY_IMPORT = {
    "data": {"data"},
    "harnesses": {"harnesses", "data"},
    "generators": {"generators", "harnesses", "data"},
    "judges": {"judges", "harnesses", "data"},
    "families": {"families", "generators", "judges", "harnesses", "data"},
    "sources": {"sources", "families", "harnesses", "data"},
    "flows": set(LAYERS),
}
# room -> (its modules, the layers besides itself that may import them)
ROOMS = {
    "training": (
        {
            "harnesses.trainer",
            "harnesses.train_environments",
            "harnesses.train_episodes",
            "harnesses.warm_start",
        },
        {"flows"},
    ),
}
# sealed room -> its package: it imports none of our modules outside itself
SEALED = {Path("data", "runtime"): "data.runtime"}


def imported_modules(root: Path, path: Path) -> list[tuple[int, str, bool]]:
    """(line, absolute module name, whether it was relative) of every import in the file,
    relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, False) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the file's own package, up `level - 1` folders
                base = parts[: len(parts) - node.level]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((node.lineno, module, bool(node.level)))
    return found


def offences(root: Path = ROOT) -> list[str]:
    """`file:line -> module` for each import that breaks the layering rule."""
    lines = []
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            for line, module, relative in imported_modules(root, path):
                top = module.split(".")[0]
                allowed = top in MAY_IMPORT[layer] or top not in LAYERS
                if top == "prefect" and layer != "flows":
                    allowed = False
                if not _may_enter(path.relative_to(root), layer, module):
                    allowed = False
                if not _stays_inside(path.relative_to(root), module, relative):
                    allowed = False
                if not allowed:
                    lines.append(f"{path.relative_to(root)}:{line} -> {module}")
    return lines


def _may_enter(path: Path, layer: str, module: str) -> bool:
    """Whether the file at `path` (relative, in `layer`) may import `module` under ROOMS."""
    importer = ".".join(path.with_suffix("").parts)
    for members, entrances in ROOMS.values():
        inside = any(module == m or module.startswith(m + ".") for m in members)
        if inside and importer not in members and layer not in entrances:
            return False
    return True


def _stays_inside(path: Path, module: str, relative: bool) -> bool:
    """Whether `module`, imported by the file at `path`, keeps a sealed room's imports inside:
    relative imports of its own modules only (an absolute `data.runtime...` breaks the copy)."""
    for room, package in SEALED.items():
        if room in path.parents and module.split(".")[0] in LAYERS:
            return relative and (module == package or module.startswith(package + "."))
    return True


def test_imports_point_down_only():
    found = offences()
    assert not found, "imports against docs/architecture.md's layering:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("layer", "source", "offence"),
    [
        ("data", "from judges.passrate import POOL_CEILINGS\n", "judges.passrate"),
        ("harnesses", "def f():\n    from judges import world_state\n", "judges"),
        ("generators", "from judges.world_state import Call\n", "judges.world_state"),
        (
            "judges",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from generators.trace_worlds import Observation\n",
            "generators.trace_worlds",
        ),
        ("generators", "from ..judges import world_state\n", "judges"),
        ("judges", "import prefect\n", "prefect"),
        ("families", "from flows import stages\n", "flows"),
        ("judges", "from harnesses.trainer import RewardSampler\n", "harnesses.trainer"),
        ("data/runtime", "from data.lake.records import Task\n", "data.lake.records"),
        ("data/runtime", "from ..lake import Lake\n", "data.lake"),
        ("data/runtime", "from data.runtime.errors import ReasonedError\n", "data.runtime.errors"),
    ],
)
def test_the_check_catches_an_upward_import(tmp_path, layer, source, offence):
    (tmp_path / layer).mkdir(parents=True)
    (tmp_path / layer / "bad.py").write_text(source)
    line = source.count("\n")
    assert offences(tmp_path) == [f"{layer}/bad.py:{line} -> {offence}"]


def test_flows_may_import_prefect_and_every_layer(tmp_path):
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "ok.py").write_text("import prefect\nfrom judges import rewards\n")
    assert offences(tmp_path) == []


MAX_MODULE_LINES = 500


def test_no_product_module_is_over_500_lines():
    """A module past MAX_MODULE_LINES holds more than one concept: split it where they part."""
    long = {
        str(path.relative_to(ROOT)): lines
        for layer in LAYERS
        for path in sorted((ROOT / layer).rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
