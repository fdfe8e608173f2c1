"""A portable llama.cpp build for the embedded model: instruction sets from what the kernel
enables, never from what the CPU claims, and never AMX.

A native build (`-march=native`, llama.cpp's default) asks CPUID, and a virtual CPU may advertise
instructions the host or the kernel does not let it run (AMX on a Firecracker VM: the build then
dies with SIGILL on its first completion). The kernel's `/proc/cpuinfo` flags list only what it
enabled, so the build turns every llama.cpp instruction-set option on or off from them, with
`GGML_NATIVE=OFF`. Every option is set explicitly: with native off, llama.cpp would otherwise
turn AVX/AVX2/FMA/F16C on by default. AMX is off whatever the flags say (see ALWAYS_OFF).

pip's wheel cache does not key on `CMAKE_ARGS`, so the wheel is built outside it, into a
wheelhouse keyed by version, Python and the option set; a re-install on the same kind of CPU
reuses it and never rebuilds. What was built is written to `<venv>/share/taskfoundry/
llama-build.json`, so that `data.llm.embedded` can refuse a build copied onto a CPU that lacks one
of its instruction sets before it starts any server.

Run with the virtualenv's Python (stdlib only, before the project is installed):
    python data/llm/llama_build.py install     # build or reuse the wheel, install it
    python data/llm/llama_build.py flags       # print the CMAKE_ARGS for this machine
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "llama-cpp-python"
BUILD_RECORD = Path("share") / "taskfoundry" / "llama-build.json"
CONSTRAINTS = Path(__file__).resolve().parents[2] / "constraints.txt"

# llama.cpp's x86 option -> the /proc/cpuinfo flags that must all be listed to turn it on.
X86_OPTIONS: dict[str, tuple[str, ...]] = {
    "GGML_SSE42": ("sse4_2",),
    "GGML_AVX": ("avx",),
    "GGML_AVX2": ("avx2",),
    "GGML_BMI2": ("bmi2",),
    "GGML_FMA": ("fma",),
    "GGML_F16C": ("f16c",),
    "GGML_AVX_VNNI": ("avx_vnni",),
    "GGML_AVX512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
    "GGML_AVX512_VBMI": ("avx512vbmi",),
    "GGML_AVX512_VNNI": ("avx512_vnni",),
    "GGML_AVX512_BF16": ("avx512_bf16",),
}
# AMX is never built: a kernel that lists it does not prove llama.cpp's AMX kernels run. On a
# Firecracker VM whose kernel lists amx_tile/int8/bf16 and enables AMX tile data (a plain C
# `tilezero` runs there), ggml_backend_amx_mul_mat dies with SIGILL at `tilezero` (found with
# gdb); elsewhere amx_int8 is advertised by CPUID and not listed. It speeds up only some
# quantised matrix products, which the embedded 135M model does not need.
ALWAYS_OFF = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")
# aarch64 `Features` -> the -march extension llama.cpp's GGML_CPU_ARM_ARCH takes.
ARM_EXTENSIONS: dict[str, str] = {"asimddp": "dotprod", "fphp": "fp16", "i8mm": "i8mm"}


@dataclass(frozen=True)
class BuildPlan:
    """The CMake options of a portable build and the CPU flags it relies on."""

    machine: str
    options: tuple[tuple[str, str], ...]
    requires: tuple[str, ...]  # cpuinfo flags every instruction set of the build needs

    @property
    def cmake_args(self) -> str:
        return " ".join(f"-D{name}={shlex.quote(value)}" for name, value in self.options)

    def key(self, version: str) -> str:
        """Names this build in the wheelhouse: version, Python, machine and options."""
        tag = sysconfig.get_config_var("SOABI") or sys.implementation.cache_tag
        digest = hashlib.sha256(f"{tag}|{self.machine}|{self.cmake_args}".encode()).hexdigest()
        return f"{version}-{self.machine}-{digest[:16]}"


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The instruction-set flags of the first processor in a `/proc/cpuinfo` text (x86
    `flags`, aarch64 `Features`)."""
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def plan_build(cpuinfo: str, machine: str) -> BuildPlan:
    """The portable build for a machine whose kernel reports `cpuinfo`."""
    flags = cpu_flags(cpuinfo)
    options: list[tuple[str, str]] = [("GGML_NATIVE", "OFF")]
    requires: set[str] = set()
    if machine in ("x86_64", "amd64"):
        for option, needed in X86_OPTIONS.items():
            enabled = all(flag in flags for flag in needed)
            options.append((option, "ON" if enabled else "OFF"))
            if enabled:
                requires.update(needed)
        options.extend((option, "OFF") for option in ALWAYS_OFF)
    elif machine in ("aarch64", "arm64"):
        extensions = [ext for flag, ext in ARM_EXTENSIONS.items() if flag in flags]
        options.append(("GGML_CPU_ARM_ARCH", "+".join(["armv8.2-a", *extensions])))
        requires.update(flag for flag in ARM_EXTENSIONS if flag in flags)
    return BuildPlan(machine, tuple(options), tuple(sorted(requires)))


def missing_instructions(requires: list[str], cpuinfo: str) -> list[str]:
    """The flags a build relies on that this machine's kernel does not list."""
    flags = cpu_flags(cpuinfo)
    return sorted(flag for flag in requires if flag not in flags)


def pinned_version(constraints: Path = CONSTRAINTS) -> str:
    """The llama-cpp-python version pinned in constraints.txt."""
    for line in constraints.read_text().splitlines():
        found = re.fullmatch(rf"\s*{PACKAGE}\s*==\s*([^\s#]+)\s*(#.*)?", line)
        if found:
            return found.group(1)
    raise SystemExit(f"{constraints} pins no {PACKAGE} version ({PACKAGE}==X.Y.Z)")


def wheelhouse() -> Path:
    """Where built wheels are kept, outside pip's cache (which ignores CMAKE_ARGS)."""
    if os.environ.get("FOUNDRY_WHEELHOUSE"):
        return Path(os.environ["FOUNDRY_WHEELHOUSE"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "taskfoundry" / "llama-cpp-wheels"


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, env=env)


def build_wheel(plan: BuildPlan, version: str, into: Path) -> Path:
    """The wheel for `plan`: the one built before, else a fresh build (several minutes)."""
    wheels = sorted(into.glob("llama_cpp_python-*.whl"))
    if wheels:
        print(f"llama-cpp-python {version}: reusing {wheels[0]}", flush=True)
        return wheels[0]
    print(f"llama-cpp-python {version}: building with {plan.cmake_args}", flush=True)
    staging = into.with_name(into.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(into, ignore_errors=True)
    env = {**os.environ, "CMAKE_ARGS": plan.cmake_args, "FORCE_CMAKE": "1"}
    _pip(
        "wheel", "--no-deps", "--no-cache-dir", "--no-binary", PACKAGE,
        "-w", str(staging), f"{PACKAGE}=={version}",
        env=env,
    )  # fmt: skip
    staging.rename(into)  # a build killed half-way never leaves a wheel to reuse
    return next(into.glob("llama_cpp_python-*.whl"))


def install(cpuinfo: str, machine: str) -> None:
    """Install the portable llama-cpp-python build into this Python's environment."""
    version = pinned_version()
    plan = plan_build(cpuinfo, machine)
    record_path = Path(sys.prefix) / BUILD_RECORD
    record = {"version": version, "cmake_args": plan.cmake_args, "requires": list(plan.requires)}
    if record_path.exists() and json.loads(record_path.read_text()) == record:
        print(f"llama-cpp-python {version}: portable build already installed", flush=True)
        return
    into = wheelhouse() / plan.key(version)
    into.parent.mkdir(parents=True, exist_ok=True)
    wheel = build_wheel(plan, version, into)
    _pip("install", "--force-reinstall", "--no-deps", str(wheel))
    record_path.parent.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(record, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["install", "flags"])
    parser.add_argument("--cpuinfo", type=Path, default=Path("/proc/cpuinfo"))
    parser.add_argument("--machine", default=platform.machine())
    args = parser.parse_args()
    cpuinfo = args.cpuinfo.read_text() if args.cpuinfo.exists() else ""
    if args.command == "flags":
        print(plan_build(cpuinfo, args.machine).cmake_args)
    else:
        install(cpuinfo, args.machine)


if __name__ == "__main__":
    main()
