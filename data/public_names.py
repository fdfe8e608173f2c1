"""How an exported taskset names what the operator ingested: never by a path of the machine
that ran the pipeline, which a taskset pushed to a hub would otherwise publish.

A document is named relative to the root it was ingested from (`relative_name`, recorded at
ingest as `Source.name`): `docs/guides/setup.md` for `/home/me/docs/guides/setup.md` ingested
as `/home/me/docs`, `setup.md` for the file given itself. A trace file, a world spec and a
repository go by their own names (`public_origin`), with the line, span or rollout a trace
came from; a remote repository keeps its URL, without credentials. The lake keeps the full
paths: they are the operator's, and `foundry stats` and the report show them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from itertools import takewhile
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit, urlunsplit

_GLOB_CHARACTERS = re.compile(r"[*?\[]")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_FILE_PREFIX = "file:"


def search_root(argument: str) -> Path:
    """The root an ingest argument names: a glob pattern's folders before the first with a
    wildcard, else the file or folder itself."""
    parts = Path(argument).parts
    if not any(_GLOB_CHARACTERS.search(part) for part in parts):
        return Path(argument)
    literal = list(takewhile(lambda part: not _GLOB_CHARACTERS.search(part), parts[:-1]))
    return Path(*literal) if literal else Path(".")


def relative_name(path: Path, root: Path) -> str:
    """`path` named from the root it was found under: the root's own name, then the path within
    it (`docs/guides/setup.md`); a file given as its own root goes by its name."""
    try:
        inside = path.relative_to(root)
    except ValueError:
        return path.name
    if inside == Path("."):
        return path.name
    return (PurePosixPath(root.resolve().name or "root") / inside.as_posix()).as_posix()


def public_origin(origin: str) -> str:
    """An origin as an export may show it: a URL without its credentials, query or fragment;
    a local path (`file:` prefixed or not) by its last component, with the `:line`, `#span` or
    `#rollout` after it kept."""
    if not origin:
        return origin
    if _URL.match(origin):
        parts = urlsplit(origin)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    if origin.startswith(_FILE_PREFIX):
        return _FILE_PREFIX + public_origin(origin[len(_FILE_PREFIX) :])
    head, hash_sign, fragment = origin.partition("#")
    name = PurePosixPath(head.replace("\\", "/")).name if head else ""
    return f"{name}{hash_sign}{fragment}"


def public_sources(refs: str | None, document_names: Mapping[str, str]) -> str | None:
    """A task's `source` list (JSON) with every path as an export may show it: a document by
    its recorded name (`document_names`, by source id), anything else by `public_origin`."""
    if refs is None:
        return None
    named = [
        ref | {"path": document_names.get(ref["source_id"]) or public_origin(ref["path"])}
        for ref in json.loads(refs)
    ]
    return json.dumps(named, sort_keys=True)


def public_workspace(workspace: str | None) -> str | None:
    """A code task's `workspace` (JSON) with its repository's origin as `public_origin`."""
    spec = json.loads(workspace) if workspace else None
    if not spec:
        return workspace
    return json.dumps(spec | {"origin": public_origin(spec["origin"])}, sort_keys=True)


def source_root(name: str) -> str:
    """The root of a public source name, as the card lists sources and licences are configured
    for them: a URL without its fragment; else the name's first path component without the
    `:line`, `#span` or `#rollout` after it (`docs` for `docs/guides/setup.md`, `traces.jsonl`
    for `traces.jsonl:12`)."""
    if _URL.match(name):
        return name.partition("#")[0]
    name = name.removeprefix(_FILE_PREFIX)
    first = PurePosixPath(name.partition("#")[0]).parts[0] if name.partition("#")[0] else name
    return re.sub(r":\d+$", "", first)
