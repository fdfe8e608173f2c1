"""The portable llama.cpp build: options from the kernel's cpuinfo, the wheelhouse, the check
that refuses a build this machine cannot run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data.llm import (
    ALWAYS_OFF,
    X86_OPTIONS,
    EmbeddedModelError,
    build_wheel,
    check_build,
    describe_exit,
    llama_build,
    missing_instructions,
    plan_build,
)

X86_BASE = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 bmi2 fma f16c"
AVX512 = "avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16"


def cpuinfo(flags: str, field: str = "flags") -> str:
    """A /proc/cpuinfo text for two processors with `flags`."""
    one = f"processor\t: 0\nvendor_id\t: GenuineIntel\n{field}\t\t: {flags}\n\n"
    return one + one.replace(": 0", ": 1", 1)


def options(flags: str) -> dict[str, str]:
    return dict(plan_build(cpuinfo(flags), "x86_64").options)


def test_amx_is_never_built_whatever_the_flags_say():
    """The Firecracker VMs: amx_tile listed without amx_int8 (the report), or all three listed
    and llama.cpp's AMX kernels still dying with SIGILL (this project's machines)."""
    for amx in ("amx_tile", "amx_tile amx_int8 amx_bf16"):
        plan = options(f"{X86_BASE} {AVX512} {amx}")

        assert plan["GGML_NATIVE"] == "OFF"
        assert plan["GGML_AMX_TILE"] == plan["GGML_AMX_INT8"] == plan["GGML_AMX_BF16"] == "OFF"
        assert plan["GGML_AVX512"] == plan["GGML_AVX512_VNNI"] == plan["GGML_AVX512_BF16"] == "ON"


def test_every_instruction_set_option_is_set_either_way():
    """With native off llama.cpp turns AVX/AVX2/FMA/F16C on by default: each is explicit."""
    plan = options("fpu sse sse2 sse4_2")

    assert set(X86_OPTIONS) | set(ALWAYS_OFF) <= set(plan)
    assert plan["GGML_SSE42"] == "ON"
    assert {plan[o] for o in [*X86_OPTIONS, *ALWAYS_OFF] if o != "GGML_SSE42"} == {"OFF"}


def test_avx512_needs_all_of_its_foundation_flags():
    partial = AVX512.replace("avx512bw ", "")
    assert options(f"{X86_BASE} {partial}")["GGML_AVX512"] == "OFF"
    assert options(f"{X86_BASE} {AVX512}")["GGML_AVX512"] == "ON"


def test_a_build_requires_exactly_the_flags_of_its_options():
    plan = plan_build(cpuinfo(f"{X86_BASE} {AVX512} amx_tile amx_int8"), "x86_64")

    assert "avx512_bf16" in plan.requires and "avx512bw" in plan.requires
    assert not any(flag.startswith("amx") for flag in plan.requires)
    without_bf16 = cpuinfo(f"{X86_BASE} {AVX512.replace(' avx512_bf16', '')}")
    assert missing_instructions(list(plan.requires), without_bf16) == ["avx512_bf16"]


def test_aarch64_takes_its_extensions_from_features():
    info = cpuinfo("fp asimd evtstrm aes crc32 asimddp fphp asimdhp i8mm", field="Features")
    plan = plan_build(info, "aarch64")

    assert dict(plan.options) == {
        "GGML_NATIVE": "OFF",
        "GGML_CPU_ARM_ARCH": "armv8.2-a+dotprod+fp16+i8mm",
    }
    assert plan.requires == ("asimddp", "fphp", "i8mm")


def test_wheelhouse_key_changes_with_the_options_and_the_version():
    avx2 = plan_build(cpuinfo(X86_BASE), "x86_64")
    avx512 = plan_build(cpuinfo(f"{X86_BASE} {AVX512}"), "x86_64")

    assert avx2.key("0.3.36") != avx512.key("0.3.36")
    assert avx2.key("0.3.36") != avx2.key("0.3.37")
    assert avx2.key("0.3.36") == plan_build(cpuinfo(X86_BASE), "x86_64").key("0.3.36")


def test_a_wheel_in_the_wheelhouse_is_reused_without_building(tmp_path, monkeypatch):
    built = tmp_path / "0.3.36-x86_64-abc"
    built.mkdir()
    wheel = built / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"a wheel")

    def no_pip(*args, **kwargs):
        raise AssertionError("pip was asked to build a wheel that is in the wheelhouse")

    monkeypatch.setattr(llama_build, "_pip", no_pip)
    plan = plan_build(cpuinfo(X86_BASE), "x86_64")
    assert build_wheel(plan, "0.3.36", built) == wheel


def test_the_llama_cpp_version_is_pinned():
    assert llama_build.pinned_version().count(".") == 2


def write_record(path: Path, requires: list[str]) -> Path:
    path.write_text(json.dumps({"version": "0.3.36", "cmake_args": "", "requires": requires}))
    return path


def test_a_build_this_cpu_cannot_run_is_refused_before_it_starts(tmp_path):
    record = write_record(tmp_path / "llama-build.json", ["avx2", "avx512_vnni"])
    info = tmp_path / "cpuinfo"
    info.write_text(cpuinfo(X86_BASE))  # a build copied from an AVX-512 machine

    with pytest.raises(EmbeddedModelError, match="cannot run .*avx512_vnni.*make install"):
        check_build(record, info)

    info.write_text(cpuinfo(f"{X86_BASE} avx512_vnni"))
    check_build(record, info)  # everything it needs is enabled


def test_a_build_without_a_record_is_left_to_the_probe(tmp_path):
    """No record of what the build needs: the check refuses nothing, on a CPU that a record
    asking for more would be refused on, and the server's probe decides."""
    info = tmp_path / "cpuinfo"
    info.write_text(cpuinfo(X86_BASE))
    record = write_record(tmp_path / "llama-build.json", ["avx2", "avx512_vnni"])
    with pytest.raises(EmbeddedModelError):
        check_build(record, info)  # with its record, this build is refused here
    record.unlink()
    try:
        assert check_build(record, info) is None
    except EmbeddedModelError as refused:
        pytest.fail(
            f"a build without a record was refused rather than left to the probe: {refused}"
        )


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (-4, "SIGILL: the llama.cpp build uses CPU instructions this machine cannot run"),
        (132, "SIGILL"),
        (-9, "SIGKILL (out of memory"),
        (-11, "killed by SIGSEGV"),
        (1, "exited with code 1"),
    ],
)
def test_a_server_death_is_said_in_words(code, words):
    assert words in describe_exit(code)
