"""The base of every record: `Record` (frozen, stored in parquet with nested fields as JSON,
chat messages as structs), content ids, seeds, and the small vocabularies records share
(bands, pools, remedies)."""

from __future__ import annotations

import functools
import hashlib
import json
import types
import typing
from datetime import UTC, datetime
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = "1"

Band = Literal["too_easy", "in_band", "too_hard"]
Pool = Literal["easy", "normal", "hard"]
# the difficulty pools (prime-rl's): each pool's inclusive ceiling on the mean reward, in order
POOL_CEILINGS: dict[Pool, float] = {"hard": 0.25, "normal": 0.75, "easy": 1.0}
ItemStatus = Literal["done", "rejected", "failed"]
Direction = Literal["harder", "easier"]  # where the repair loop moves an out-of-band task
# what reviewing a task did to its verifier (see `Review`): none_held, a remedy was tried and
# none held; no_remedy, its family has none to try (code and tool-use tasks)
Remedy = Literal[
    "none_needed",
    "exact_match_only",
    "equivalence_rubric",
    "rubric_items",
    "none_held",
    "no_remedy",
]


def content_id(*parts: Any, length: int = 16) -> str:
    """A stable content hash of `parts` (canonical JSON, sha256, hex prefix)."""
    canonical = json.dumps(
        parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_jsonable
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:length]


def seed_for(*parts: str) -> tuple[str, int]:
    """A seed string and the 32-bit integer derived from it (sha256, never `hash()`)."""
    text = "/".join(parts)
    return text, int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def utcnow() -> datetime:
    return datetime.now(UTC)


class Record(BaseModel):
    """Base of all lake records: frozen, no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_row(self) -> dict[str, Any]:
        """Flatten to a parquet row: nested models and containers become JSON strings."""
        row: dict[str, Any] = {}
        for name, storage in _storage(type(self)).items():
            value = getattr(self, name)
            if storage == "messages":
                row[name] = [m.model_dump() for m in value]
            elif storage == "json":
                row[name] = json.dumps(_dump(value), ensure_ascii=False, sort_keys=True)
            else:
                row[name] = value
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Record:
        """Inverse of `to_row`."""
        values = {}
        fields = cls.model_fields
        for name, storage in _storage(cls).items():
            value = row.get(name)
            if value is None and not fields[name].is_required():
                continue  # a column added after this row was written: take the default
            if isinstance(value, str) and storage == "json":
                value = json.loads(value)
            values[name] = value
        return cls.model_validate(values)

    @classmethod
    @functools.cache
    def arrow_schema(cls) -> pa.Schema:
        """The parquet schema of this record type."""
        return pa.schema(
            [
                pa.field(name, _arrow_type(info.annotation))
                for name, info in cls.model_fields.items()
            ]
        )


@functools.cache
def _storage(record: type[Record]) -> dict[str, Literal["messages", "json", "plain"]]:
    """How each field of `record` is stored in parquet: a list of message structs, a JSON
    string (nested models and containers) or the value itself."""
    storage: dict[str, Literal["messages", "json", "plain"]] = {}
    for name, info in record.model_fields.items():
        if _is_message_list(info.annotation):
            storage[name] = "messages"
        elif _is_nested(info.annotation):
            storage[name] = "json"
        else:
            storage[name] = "plain"
    return storage


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def _strip_optional(annotation: Any) -> Any:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _is_message_list(annotation: Any) -> bool:
    inner = _strip_optional(annotation)
    return typing.get_origin(inner) is list and typing.get_args(inner) == (Message,)


def _is_float_list(annotation: Any) -> bool:
    inner = _strip_optional(annotation)
    return typing.get_origin(inner) is list and typing.get_args(inner) == (float,)


def _is_nested(annotation: Any) -> bool:
    inner = _strip_optional(annotation)
    if _is_float_list(inner):
        return False
    if typing.get_origin(inner) in (list, dict, tuple):
        return True
    members = typing.get_args(inner) if isinstance(inner, types.UnionType) else (inner,)
    return all(isinstance(m, type) and issubclass(m, BaseModel) for m in members)


_SCALARS: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    datetime: pa.timestamp("us", tz="UTC"),
}


def _arrow_type(annotation: Any) -> pa.DataType:
    inner = _strip_optional(annotation)
    if inner in _SCALARS:
        return _SCALARS[inner]
    if typing.get_origin(inner) is Literal:
        return pa.string()
    if _is_float_list(inner):
        return pa.list_(pa.float32())
    if _is_message_list(inner):
        return pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    return pa.string()  # nested: stored as JSON


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    role: Literal["system", "user", "assistant", "tool"]
    content: str
