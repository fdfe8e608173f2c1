"""Start pytest in a sandbox so that the code under test cannot forge the outcomes.

Run by the sandboxed interpreter as `python -I -S boot.py FD SITE_PACKAGES PATHS -- ARGS`:
- `-I -S`: no `PYTHONPATH`, no user site and no `site` module, so no `sitecustomize`,
  `usercustomize` or `.pth` file of the repository runs at start-up;
- pytest and the outcome stream (`outcome_stream.py`) are imported from this folder and the
  test environment's SITE_PACKAGES before the repository's PATHS go on `sys.path`, so the
  repository cannot shadow them;
- FD, the write end of the grader's pipe, is closed on exec: a process the tests start does
  not inherit it.
The exit status is pytest's; the stream's last record repeats it for the grader to compare.
"""

import os
import sys


def main(argv: list[str]) -> int:
    fd, site_packages, paths, separator, *args = argv
    if separator != "--":
        raise SystemExit("usage: boot.py FD SITE_PACKAGES PATHS -- PYTEST_ARGS")
    stream_fd = int(fd)
    os.set_inheritable(stream_fd, False)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [here, site_packages]
    import pytest
    from outcome_stream import OutcomeStream

    sys.path.remove(here)
    sys.path[:0] = [p for p in paths.split(os.pathsep) if p]
    return int(pytest.main(args, plugins=[OutcomeStream(stream_fd)]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
