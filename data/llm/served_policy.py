"""The policy an evaluation measures, as the OpenAI-compatible endpoint the solver role uses.

A policy is named one of four ways:
- `embedded`: the embedded model, on the embedded llama.cpp server;
- a model folder (what `foundry train` saves, or any transformers checkpoint): served for the
  evaluation by `transformers serve` (the CPU, or a GPU where torch sees one), sampling at
  the temperature asked, under a name that carries the hash of its weights, so a folder
  trained again is a new policy and never meets answers cached for the old one. For vLLM,
  serve the folder yourself and name it `MODEL@URL`;
- `MODEL@URL`: a model on an OpenAI-compatible server (`URL` ends in `/v1`);
- `MODEL`: a model on the configured solver's server.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from data.llm.embedded import free_port, supervised_server
from data.llm.policy import EMBEDDED
from data.llm.settings import RolesConfig, solver_pointed_at
from data.names import slug

WEIGHTS = ("*.safetensors", "*.bin", "*.gguf")
HASH_CHUNK = 1 << 20
GENERATION_CONFIG = "generation_config.json"


@dataclass(frozen=True)
class Policy:
    spec: str  # as the user named it
    label: str  # names it in the lake and in tables: `embedded`, `<folder>-<hash>`, the model
    model: str | None = None  # None: the embedded model
    base_url: str | None = None  # None: the embedded server, or the solver's for a bare model
    folder: Path | None = None  # a model folder to serve


def parse_policy(spec: str) -> Policy:
    """The policy `spec` names (see the module docstring); a folder's weights are hashed."""
    if spec == EMBEDDED:
        return Policy(spec, EMBEDDED)
    folder = Path(spec).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise ValueError(f"{folder} is a folder but not a model folder (no config.json)")
        folder = folder.resolve()
        label = f"{slug(folder.name) or 'policy'}-{weights_hash(folder)[:12]}"
        return Policy(spec, label, folder=folder)
    model, at, url = spec.partition("@")
    if at and not url.startswith(("http://", "https://")):
        raise ValueError(f"policy {spec!r}: after @ comes the server's URL (http://.../v1)")
    return Policy(spec, slug(model) or "policy", model=model, base_url=url or None)


def weights_hash(folder: Path) -> str:
    """The sha256 of a model folder's weight files (names and bytes, in name order)."""
    digest = hashlib.sha256()
    files = sorted({path for pattern in WEIGHTS for path in folder.glob(pattern)})
    if not files:
        raise ValueError(f"{folder} holds no weights ({', '.join(WEIGHTS)})")
    for path in files:
        digest.update(path.name.encode("utf-8") + b"\0")
        with path.open("rb") as handle:
            while chunk := handle.read(HASH_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


@contextmanager
def serving(policy: Policy, cache: Path, logs: Path) -> Iterator[Policy]:
    """`policy` ready to be asked: a model folder served on loopback for as long as this
    lasts (as `cache/served/<label>`, see `served_folder`); any other policy as it is."""
    if policy.folder is None:
        yield policy
        return
    served = served_folder(policy.folder, cache / "served" / policy.label)
    port = free_port()
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(served)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--device", "auto"]
    logs.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the folder is local: never ask a hub
    with supervised_server(command, port, logs / f"policy-{policy.label}.log") as url:
        yield replace(policy, model=str(served), base_url=url)


def served_folder(folder: Path, served: Path) -> Path:
    """`served`: links to the files of model `folder`, and a generation config that samples.
    Its name carries the weights' hash; the config is needed because `transformers serve`
    samples only where the model's own generation config says so (most say nothing, and a
    request's temperature was then ignored: every attempt the same greedy reply). A request at
    temperature 0 is still answered greedily. Made aside and renamed into place."""
    if (served / GENERATION_CONFIG).is_file():
        return served
    tmp = served.with_name(f".{served.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for entry in folder.iterdir():
        if entry.name != GENERATION_CONFIG:
            (tmp / entry.name).symlink_to(entry)
    original = folder / GENERATION_CONFIG
    settings = json.loads(original.read_text()) if original.is_file() else {}
    (tmp / GENERATION_CONFIG).write_text(json.dumps({**settings, "do_sample": True}, indent=2))
    shutil.rmtree(served, ignore_errors=True)
    os.replace(tmp, served)
    return served


def with_policy(roles: RolesConfig, policy: Policy) -> RolesConfig:
    """`roles` with the solver pointed at `policy` (once `serving` has it ready)."""
    if policy.model is None:  # the embedded model, whatever the solver is configured as
        solver = roles.solver.model_copy(update={"base_url": None, "model": None})
    else:
        solver = solver_pointed_at(roles, policy.model, policy.base_url).solver
        if policy.folder is not None:  # one generation at a time: the server has no batching
            solver = solver.model_copy(update={"max_concurrency": 1})
    return roles.model_copy(update={"solver": solver})
