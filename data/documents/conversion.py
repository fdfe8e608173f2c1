"""Converting a document with `data.formats.converters` in a child process with limits.

A converter parses untrusted files with third-party libraries: the child gets the configured
time (wall and CPU) and address-space limits, so a file that makes its library hang, balloon
or crash costs that file only, recorded with the reason (`conversion_timeout`,
`conversion_failed`), while the run goes on.
"""

from __future__ import annotations

import json
import math
import resource
import subprocess
import sys
from pathlib import Path

from data.formats import Converted, Section

MEGABYTE = 1 << 20


class ConversionError(Exception):
    """The file could not be converted: `reason` (a stable label) and `detail`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def convert(path: Path, timeout_s: float, memory_mb: int) -> Converted:
    """`path` converted by its format's converter in a child process with at most `timeout_s`
    seconds and `memory_mb` MiB of address space; raises `ConversionError` with the reason."""

    def limited() -> None:  # in the child, before it runs Python
        space = memory_mb * MEGABYTE
        resource.setrlimit(resource.RLIMIT_AS, (space, space))
        cpu = math.ceil(timeout_s) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))

    command = [sys.executable, "-m", "data.formats.converters", str(path)]
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=timeout_s, preexec_fn=limited, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ConversionError("conversion_timeout", f"over {timeout_s:g} s") from exc
    if done.returncode != 0:
        ending = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
        detail = f"{how}: {ending[0]}" if ending[0] else how
        if "MemoryError" in ending[0]:
            detail = f"over {memory_mb} MiB: {detail}"
        raise ConversionError("conversion_failed", detail[:300])
    result = json.loads(done.stdout)
    if "unusable" in result:
        raise ConversionError(result["unusable"]["reason"], result["unusable"]["detail"])
    converted = result["converted"]
    sections = [Section(**section) for section in converted["sections"]]
    return Converted(converted["title"], sections, converted["notes"])
