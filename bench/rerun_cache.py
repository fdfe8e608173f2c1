"""Re-run cost: `foundry run` twice on the same home, against a fake server in this process.

Run 1 does everything (ingest, LLM stages, export); run 2 should find nothing pending and make
no LLM call. With `--fresh-lake`, a third run starts from a new lake that keeps only run 1's
LLM response cache, so every LLM request has to be answered from the cache.

Run from the repository root: `.venv/bin/python bench/rerun_cache.py`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes import openai_server  # noqa: E402
from tests.fakes.oracle import Oracle  # noqa: E402
from tests.processes import running_prefect_server  # noqa: E402

TARGET_RATIO = 0.05
DEFAULT_DOCS = ROOT / "data" / "samples" / "docs"
USAGE_LINE = re.compile(r"^LLM calls this run: (\d+) live, (\d+) from cache, .*$", re.M)


@dataclass
class Run:
    """One `foundry run`: wall time, requests the server received, and what foundry printed."""

    name: str
    seconds: float
    requests: int
    usage_line: str
    live: int | None
    cached: int | None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="fake server delay, s")
    parser.add_argument(
        "--docs",
        default=str(DEFAULT_DOCS),
        help="documents to run on; 'samples' for every bundled sample (docs, repository,"
        " traces, worlds), as `make run` does",
    )
    parser.add_argument(
        "--fresh-lake",
        action="store_true",
        help="also run on a new lake holding only run 1's LLM cache",
    )
    parser.add_argument(
        "--prefect-server",
        action="store_true",
        help="run against a Prefect server started once (as deployed: scheduled runs and UI"
        " backfills), not the ephemeral server each `foundry` process starts",
    )
    parser.add_argument("--timeout", type=float, default=600, help="limit per run, s")
    return parser.parse_args(argv)


def foundry_command() -> str:
    """The `foundry` entry point of the project's virtualenv (or of this interpreter's)."""
    for candidate in (ROOT / ".venv" / "bin" / "foundry", Path(sys.executable).parent / "foundry"):
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("foundry")
    if found is None:
        raise SystemExit("no `foundry` command: run `make install` first")
    return found


def foundry_env(base_url: str, prefect_home: Path) -> dict[str, str]:
    """Every role on the fake server; Prefect quiet and isolated in `prefect_home`."""
    env = {k: v for k, v in os.environ.items() if k not in ("FOUNDRY_CONFIG", "FOUNDRY_HOME")}
    env.update(
        {
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_KEY": "x",
            "FOUNDRY_MODEL": "fake-model",
            "PREFECT_HOME": str(prefect_home),
            "DO_NOT_TRACK": "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_LOGGING_LEVEL": "WARNING",
        }
    )
    return env


def run_foundry(
    name: str,
    arguments: list[str],
    home: Path,
    env: dict[str, str],
    timeout: float,
    server: openai_server.FakeOpenAIServer,
) -> Run:
    """`foundry ARGUMENTS --home HOME --config HOME/foundry.toml`, timed from start to exit."""
    config = home / "foundry.toml"  # empty: built-in defaults, never a ./foundry.toml
    home.mkdir(parents=True, exist_ok=True)
    config.touch()
    command = [foundry_command(), *arguments, "--home", str(home), "--config", str(config)]
    first = len(server.requests)
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    seconds = time.monotonic() - started
    requests = len(server.requests) - first
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"{name}: `foundry {arguments[0]}` exited with {done.returncode}")
    match = USAGE_LINE.search(done.stdout)
    if match is None:
        line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "(no output)"
        return Run(name, seconds, requests, line, None, None)
    return Run(name, seconds, requests, match.group(0), int(match.group(1)), int(match.group(2)))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print("config:")
    print(f"  latency      {args.latency:g} s per request (fake server in this process)")
    print(f"  corpus       {args.docs}")
    corpus = [] if args.docs == "samples" else [args.docs]
    print(f"  command      {foundry_command()} run --home <tmp> --config <empty toml> <corpus>")
    prefect = "a Prefect server started once" if args.prefect_server else "ephemeral, per run"
    print(f"  prefect      {prefect}")
    with (
        tempfile.TemporaryDirectory(prefix="foundry-rerun-") as tmp,
        openai_server.FakeOpenAIServer(Oracle(), latency_s=args.latency) as server,
        ExitStack() as stack,
    ):
        base = Path(tmp)
        env = foundry_env(server.base_url, base / "prefect")
        if args.prefect_server:
            server_log = base / "prefect-server.log"
            api, _ = stack.enter_context(running_prefect_server(base / "prefect", server_log))
            env["PREFECT_API_URL"] = api
        home = base / "home"
        runs = [
            run_foundry(f"run {i}", ["run", *corpus], home, env, args.timeout, server)
            for i in (1, 2)
        ]
        floor = run_foundry("floor", ["export"], home, env, args.timeout, server)
        if args.fresh_lake:
            fresh = base / "fresh"
            shutil.copytree(home / "cache", fresh / "cache")
            runs.append(run_foundry("run 3", ["run", *corpus], fresh, env, args.timeout, server))

    print()
    print(f"{'run':<6} {'seconds':>8} {'server requests':>16}  foundry says")
    for run in [*runs[:2], floor, *runs[2:]]:
        print(f"{run.name:<6} {run.seconds:>8.1f} {run.requests:>16}  {run.usage_line}")
    print("  floor: `foundry export` on the same home, a Prefect flow doing next to nothing")
    first, second = runs[0], runs[1]
    ratio = second.seconds / first.seconds
    print()
    print(
        f"run2/run1 = {ratio:.3f} (target <= {TARGET_RATIO}: "
        f"{'meets' if ratio <= TARGET_RATIO else 'ABOVE'} target)"
    )
    net = (second.seconds - floor.seconds) / max(first.seconds - floor.seconds, 1e-9)
    print(
        f"without the fixed start-up (minus floor): run 1 {first.seconds - floor.seconds:.1f} s,"
        f" run 2 {second.seconds - floor.seconds:.1f} s, ratio {net:.3f}"
    )
    ok = second.requests == 0 and second.live == 0
    print(
        f"LLM calls on re-run: {second.requests} at the server, {second.live} live per foundry"
        f" (target 0: {'meets' if ok else 'MISSES'} target)"
    )
    started = "" if args.prefect_server else " and the start of Prefect's ephemeral server"
    print(
        "note: each run is a fresh process, so run 2 still pays Python and Prefect imports"
        f"{started}; on a corpus this small those dominate, and run 2 skips everything through"
        " the lake (items already done), never asking the response cache."
    )
    if args.fresh_lake:
        third = runs[2]
        hits = third.requests == 0 and third.live == 0 and (third.cached or 0) > 0
        print(
            f"run 3 (new lake, run 1's cache): {third.requests} at the server,"
            f" {third.cached} from cache ({'all from cache' if hits else 'NOT all cached'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
