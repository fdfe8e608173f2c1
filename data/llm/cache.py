"""A persistent LLM response cache: one small JSON file per request key.

File-per-key with an atomic rename is safe under crashes and concurrent writers (threads,
processes, or hosts sharing the folder) without any database lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any


def request_key(request: dict[str, Any]) -> str:
    """The cache key of a request: sha256 of its canonical JSON (model, messages, params, seed)."""
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """Maps a request key to the stored response payload."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, UnicodeDecodeError):
            path.unlink(missing_ok=True)  # unreadable entry: treat as a miss and replace it
            return None

    def put(self, key: str, payload: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)

    def forget(self, key: str) -> None:
        """Drop an entry (e.g. a reply that turned out unusable), so the request is asked again."""
        self._path(key).unlink(missing_ok=True)
