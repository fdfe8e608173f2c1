"""Scrubbing cost on one long line: ordinary prose against single words built to make
backtracking regular expressions slow (issue 26: 10 kB of `_a` took 4.4 s before the EMAIL
and SECRET patterns were anchored at word starts; 100 kB of `pwd:` took 57 s while the SECRET
pattern looked ahead for a digit from every name: now the value is checked once it matched).

For each size, prints the seconds the scrubber takes on prose (the baseline) and on each
adversarial word, and the ratio of each to the baseline; a linear scrubber keeps the ratios
flat as the size grows. One run per cell, timed in CPU seconds of this process (scrubbing is
single-threaded), so other load on the machine does not inflate the figures. Run from the
repository root:
`.venv/bin/python bench/scrub_lines.py [--sizes 10000 100000 1000000]`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.scrub import Scrubber  # noqa: E402

PROSE = "The kettle ships with a two year warranty and a spare filter. "
WORDS = {
    "a": "a",
    "_a": "_a",
    "pwd:": "pwd:",
    "key=": "key=",
    "+1": "+1",
    "x_password_": "x_password_",
    "a.": "a.",
    "a%40": "a%40",
    "digits": "1",
    "x@a.": "a.",  # after an "x@" prefix: one long domain
}


def line(unit: str, size: int, prefix: str = "") -> str:
    return (prefix + unit * (size // len(unit) + 1))[:size]


def word_line(name: str, size: int) -> str:
    """`size` characters of the adversarial word `name` (of WORDS), after its prefix if any."""
    return line(WORDS[name], size, "x@" if name == "x@a." else "")


def seconds(scrubber: Scrubber, text: str) -> float:
    started = time.process_time()
    scrubber.scrub(text)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    args = parser.parse_args()
    scrubber = Scrubber()
    print(f"{'size':>9} {'input':>12} {'seconds':>8} {'x prose':>8}")
    for size in args.sizes:
        base = seconds(scrubber, line(PROSE, size))
        print(f"{size:>9} {'prose':>12} {base:>8.3f} {1:>8.1f}")
        for name in WORDS:
            took = seconds(scrubber, word_line(name, size))
            print(f"{size:>9} {name:>12} {took:>8.3f} {took / base:>8.1f}")


if __name__ == "__main__":
    main()
