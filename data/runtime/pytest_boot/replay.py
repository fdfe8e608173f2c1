"""Replay calls on a tree that holds no tests and write down what each returned or raised.

Run by the sandboxed interpreter as `python -s -S replay.py FD SITE_PACKAGES PATHS CALLS`:
CALLS is a JSON list of calls (`module`, `function`, `args`, `kwargs` as `record.py` wrote
them), made in order in this one process; each result is one JSON line down FD: `{"i": n,
"returns": value}`, `{"i": n, "raises": [classes]}` or `{"i": n, "missing": why}` (the module
or function is not there, or an argument's class is not). A call that runs past CALL_S raises
TimeoutError.

Nothing this process writes is believed as such: the grader compares the results, outside,
with the reference's, which never enter the sandbox.
"""

import importlib
import json
import os
import signal
import sys

CALL_S = 10


def main(argv: list[str]) -> int:
    fd, site_packages, paths, calls_file = argv
    here = os.path.dirname(os.path.abspath(__file__))
    # this folder, then the test environment's packages; the interpreter put this folder
    # first (no -P: Python 3.10 has none): it leaves before the repository's paths come
    sys.path[:] = [here, site_packages, *(p for p in sys.path if p != here)]
    import record
    import values

    sys.path[:] = [p for p in sys.path if p != here]
    sys.path[:0] = [p for p in paths.split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = paths  # for the processes the tests start
    with open(calls_file, encoding="utf-8") as handle:
        calls = json.load(handle)
    signal.signal(signal.SIGALRM, _too_long)
    for number, call in enumerate(calls):
        result = _replayed(call, values, record)
        data = (json.dumps({"i": number, **result}, separators=(",", ":")) + "\n").encode()
        while data:
            data = data[os.write(int(fd), data) :]
    return 0


def _replayed(call: dict, values, record) -> dict:
    try:
        function = getattr(importlib.import_module(call["module"]), call["function"])
        args, kwargs = values.decode(call["args"]), values.decode(call["kwargs"])
    except Exception as error:
        return {"missing": f"{type(error).__name__}: {error}"[:300]}
    signal.alarm(CALL_S)
    try:
        result = function(*args, **kwargs)
    except Exception as error:
        return {"raises": record.raised(error, values)}
    finally:
        signal.alarm(0)
    try:
        return {"returns": values.encode(result)}
    except Exception as error:
        return {"returns": {"opaque": repr(type(error))}}


def _too_long(signum, frame):
    raise TimeoutError(f"the call ran past {CALL_S} s")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
