"""The rooms of `data/` (docs/architecture.md#the-rooms-of-data): each room is a package whose
`__init__` is its face; code outside a room imports the face (or a sub-package's face, such as
`data.lake.records`), never one of its modules; and a room imports only the rooms and shared
modules below it in `FLOORS`, so no circle can form between them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_import_direction import LAYERS, imported_modules

ROOT = Path(__file__).resolve().parent.parent
# bottom to top: a unit (room or shared module of data/) imports only units on lower floors
FLOORS: tuple[frozenset[str], ...] = (
    frozenset(
        {"settings", "names", "registry", "html_page", "public_names", "scrub", "rewarded"}
        | {"runtime", "formats"}
    ),
    frozenset({"costs", "stage_settings"}),
    frozenset({"lake"}),
    frozenset({"prompts"}),
    frozenset({"llm"}),
    frozenset({"documents"}),
    frozenset({"traces", "repos"}),
    frozenset({"export"}),
    frozenset({"config"}),
    frozenset({"review", "plan"}),
)
ROOMS = frozenset(
    path.parent.name
    for path in (ROOT / "data").glob("*/__init__.py")
    if path.parent.name not in {"runtime", "samples"}
)


def _floor(unit: str) -> int:
    for level, units in enumerate(FLOORS):
        if unit in units:
            return level
    raise AssertionError(f"data.{unit} is on no floor: add it to FLOORS (and the docs' table)")


def _unit_of_file(root: Path, path: Path) -> str | None:
    parts = path.relative_to(root).parts
    if parts[0] != "data" or len(parts) < 2:
        return None
    return Path(parts[1]).stem


def _target(root: Path, module: str) -> tuple[str, bool] | None:
    """(data's unit `module` lies in, whether `module` is that room's face or a sub-package's)."""
    parts = module.split(".")
    if parts[0] != "data" or len(parts) < 2:
        return None
    unit = parts[1]
    folder = root.joinpath(*parts)
    is_face = len(parts) == 2 or (folder / "__init__.py").is_file()
    return unit, is_face


def offences(root: Path = ROOT) -> list[str]:
    """`file:line -> module` for each import that enters a room other than by its face, or
    reaches up a floor."""
    found = []
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            here = _unit_of_file(root, path)
            if here == "samples" or "taskset_package" in path.parts:
                continue
            if "harbor_verifier" in path.parts:
                continue  # shipped into task folders: its imports name the folder's layout
            for line, module, _ in imported_modules(root, path):
                if module == "data":
                    continue
                target = _target(root, module)
                if target is None or target[0] == here:
                    continue
                unit, is_face = target
                through_face = unit not in ROOMS or is_face
                upward = here is not None and _floor(unit) >= _floor(here)
                if not through_face or upward:
                    found.append(f"{path.relative_to(root)}:{line} -> {module}")
    return found


def test_rooms_are_entered_by_their_faces_and_floors_point_down():
    found = offences()
    assert not found, "imports against the rooms of data/:\n" + "\n".join(found)


def test_every_unit_of_data_is_on_a_floor():
    units = {
        p.stem if p.is_file() else p.name
        for p in (ROOT / "data").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    missing = sorted(u for u in units - {"samples"} if not any(u in f for f in FLOORS))
    assert not missing, f"units of data/ on no floor: {missing}"


def test_a_face_exports_only_what_it_imports():
    """Each face names what it offers in `__all__`, and offers nothing it does not import."""
    for room in sorted(ROOMS):
        tree = ast.parse((ROOT / "data" / room / "__init__.py").read_text())
        imported = {
            a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names
        }
        exported = next(
            ast.literal_eval(n.value)
            for n in tree.body
            if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "__all__"
        )
        assert set(exported) == imported, room


@pytest.mark.parametrize(
    ("where", "source", "offence"),
    [
        ("flows/bad.py", "from data.lake.store import Lake\n", "data.lake.store"),
        (
            "judges/bad.py",
            "def f():\n    from data.llm.client import LLMClient\n",
            "data.llm.client",
        ),
        ("data/lake/bad.py", "from data.export import export_taskset\n", "data.export"),
        ("data/costs/bad.py", "from ..lake import Lake\n", "data.lake"),
        ("data/llm/bad.py", "from data.config import FoundryConfig\n", "data.config"),
        (
            "data/export/bad.py",
            "from data.documents.readers import read\n",
            "data.documents.readers",
        ),
    ],
)
def test_the_check_catches_a_side_door_and_an_upward_arrow(tmp_path, where, source, offence):
    for room in ("lake", "llm", "export", "costs", "documents"):
        (tmp_path / "data" / room).mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / room / "__init__.py").write_text("")
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / where).write_text(source)
    assert offences(tmp_path) == [f"{where}:{source.count(chr(10))} -> {offence}"]


def test_a_sub_package_face_and_a_lower_room_pass(tmp_path):
    (tmp_path / "data" / "lake" / "records").mkdir(parents=True)
    (tmp_path / "data" / "lake" / "records" / "__init__.py").write_text("")
    (tmp_path / "data" / "llm").mkdir(parents=True)
    (tmp_path / "data" / "llm" / "ok.py").write_text(
        "from data.lake.records import Task\n"
        "from data.lake import Lake\n"
        "from data.names import slug\n"
    )
    assert offences(tmp_path) == []
