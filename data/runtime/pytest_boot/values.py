"""Values as JSON, for the calls the grader replays outside a test run (`record.py`,
`replay.py`): a call's arguments must come back as the same values in another process
(`encode(..., rebuildable=True)`, then `decode`); a result only needs a form the grader can
compare (`encode`), never a live object.

Plain JSON stands for None, booleans, whole numbers and strings; every other value is an object
with one tag: `float`, `list`, `tuple`, `dict` (pairs), `set`, `bytes`, `decimal`, `fraction`,
`complex`, `date`, `datetime`, `time`, `timedelta`, `enum` and `dataclass` / `namedtuple` (by
their class's `module:qualname`); a result may also be an `object` (class and attributes) or
`opaque` (its class alone). This file runs inside the sandbox and imports only the standard
library.
"""

import dataclasses
import datetime
import enum
import importlib
from decimal import Decimal
from fractions import Fraction

MAX_DEPTH = 12
MAX_ITEMS = 2000  # items of one container


class Unrebuildable(ValueError):
    """An argument that another process could not rebuild (a file, a lambda, a generator)."""


def class_name(kind: type) -> str:
    return f"{kind.__module__}:{kind.__qualname__}"


def encode(value: object, rebuildable: bool = False, depth: int = 0) -> object:
    """`value` in the JSON form above; with `rebuildable`, raises Unrebuildable for a value
    `decode` could not make again."""
    if depth > MAX_DEPTH:
        return _opaque(value, rebuildable, "too deep")
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if isinstance(value, enum.Enum):
        return {"enum": class_name(kind), "name": value.name}
    simple = _SIMPLE.get(kind)
    if simple is not None:
        tag, form = simple
        return {tag: form(value)}
    if kind in (list, tuple, set, frozenset, dict) and len(value) > MAX_ITEMS:
        return _opaque(value, rebuildable, "too large")
    deeper = depth + 1
    if kind in (list, tuple):
        return {kind.__name__: [encode(item, rebuildable, deeper) for item in value]}
    if kind in (set, frozenset):
        items = [encode(item, rebuildable, deeper) for item in value]
        return {"set": sorted(items, key=repr), "frozen": kind is frozenset}
    if kind is dict:
        pairs = [
            [encode(k, rebuildable, deeper), encode(v, rebuildable, deeper)]
            for k, v in value.items()
        ]
        return {"dict": pairs}
    if isinstance(value, tuple) and hasattr(kind, "_fields"):
        return {"namedtuple": class_name(kind), "items": encode(tuple(value), rebuildable, deeper)}
    if dataclasses.is_dataclass(value):
        fields = dataclasses.fields(value)
        if rebuildable and not all(f.init for f in fields):
            raise Unrebuildable(f"{class_name(kind)} has fields its constructor does not take")
        state = {f.name: encode(getattr(value, f.name), rebuildable, deeper) for f in fields}
        return {"dataclass": class_name(kind), "fields": state}
    if rebuildable:
        raise Unrebuildable(f"a {class_name(kind)} cannot be rebuilt")
    try:
        state = object.__getattribute__(value, "__dict__")
    except AttributeError:
        return {"opaque": class_name(kind)}
    if type(state) is not dict:
        return {"opaque": class_name(kind)}
    return {"object": class_name(kind), "state": encode(dict(state), False, deeper)}


def _opaque(value: object, rebuildable: bool, why: str) -> dict:
    if rebuildable:
        raise Unrebuildable(f"a {class_name(type(value))} is {why}")
    return {"opaque": class_name(type(value)), "why": why}


_SIMPLE = {
    float: ("float", repr),
    complex: ("complex", repr),
    bytes: ("bytes", bytes.hex),
    Decimal: ("decimal", str),
    Fraction: ("fraction", str),
    datetime.datetime: ("datetime", datetime.datetime.isoformat),
    datetime.date: ("date", datetime.date.isoformat),
    datetime.time: ("time", datetime.time.isoformat),
    datetime.timedelta: ("timedelta", lambda d: [d.days, d.seconds, d.microseconds]),
}


def decode(form: object) -> object:
    """The value `encode(value, rebuildable=True)` stands for, its classes imported afresh."""
    if form is None or type(form) in (bool, int, str):
        return form
    if type(form) is not dict:
        raise ValueError(f"not an encoded value: {form!r}"[:200])
    if "float" in form:
        return float(form["float"])
    if "complex" in form:
        return complex(form["complex"])
    if "bytes" in form:
        return bytes.fromhex(form["bytes"])
    if "decimal" in form:
        return Decimal(form["decimal"])
    if "fraction" in form:
        return Fraction(form["fraction"])
    if "datetime" in form:
        return datetime.datetime.fromisoformat(form["datetime"])
    if "date" in form:
        return datetime.date.fromisoformat(form["date"])
    if "time" in form:
        return datetime.time.fromisoformat(form["time"])
    if "timedelta" in form:
        days, seconds, micros = form["timedelta"]
        return datetime.timedelta(days=days, seconds=seconds, microseconds=micros)
    if "list" in form:
        return [decode(item) for item in form["list"]]
    if "tuple" in form:
        return tuple(decode(item) for item in form["tuple"])
    if "set" in form:
        items = (decode(item) for item in form["set"])
        return frozenset(items) if form.get("frozen") else set(items)
    if "dict" in form:
        return {decode(key): decode(value) for key, value in form["dict"]}
    if "enum" in form:
        return getattr(_class(form["enum"]), form["name"])
    if "namedtuple" in form:
        return _class(form["namedtuple"])(*decode(form["items"]))
    if "dataclass" in form:
        fields = {name: decode(value) for name, value in form["fields"].items()}
        return _class(form["dataclass"])(**fields)
    raise ValueError(f"not a rebuildable value: {sorted(form)}")


def _class(name: str) -> type:
    module, _, qualname = name.partition(":")
    found: object = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not isinstance(found, type):
        raise ValueError(f"{name} is not a class")
    return found
