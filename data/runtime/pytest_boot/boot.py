"""Start pytest in a sandbox so that the code under test cannot forge the outcomes.

Run by the sandboxed interpreter as `python -s -S boot.py FD SITE_PACKAGES PATHS -- ARGS`:
- `-s -S` in the environment the sandbox writes (no `PYTHONPATH`): no user site and no `site`
  module, so no `sitecustomize`, `usercustomize` or `.pth` file of the repository runs at
  start-up (not `-I`: its `-E` would drop the sandbox's fixed `PYTHONHASHSEED`);
- pytest and the outcome stream (`outcome_stream.py`) are imported from this folder and the
  test environment's SITE_PACKAGES before the repository's PATHS go on `sys.path`, so the
  repository cannot shadow them;
- FD, the write end of the grader's pipe, is closed on exec: a process the tests start does
  not inherit it;
- before the repository's paths exist, an audit hook (PEP 578) is installed that no Python
  code can reach afterwards (only the interpreter holds it, and the ways to find it, `gc`'s
  object lists, are refused). It keeps what the plugin pins (`foundry.pin` events: the
  namespaces of pytest's, pluggy's and the plugin's modules and classes, and the plugin's
  objects in the session) and checks them whenever the plugin reports a test's call
  (`foundry.check`); it also refuses the ways to reach or rewrite the grader from inside:
  `gc.get_objects` and its kin, trace and profile functions, raw memory through `ctypes`,
  `/proc/*/mem`, new code or defaults for the plugin's functions. Each is written down the
  pipe as `{"tampered": evidence}` at once.
The exit status is pytest's; the stream's last record repeats it for the grader to compare.
"""

import os
import sys
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from types import FunctionType, ModuleType

# the audit events that reach or rewrite the grader's objects; each is refused and recorded
REFUSED = frozenset(
    {
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.settrace",
        "sys.setprofile",
        "ctypes.cdata",
        "ctypes.string_at",
        "ctypes.wstring_at",
    }
)
CODE_ATTRIBUTES = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
PROC_MEM = "/proc//mem"  # how /proc/<pid>/mem starts and ends


def main(argv: list[str]) -> int:
    fd, site_packages, paths, separator, *args = argv
    if separator != "--":
        raise SystemExit("usage: boot.py FD SITE_PACKAGES PATHS -- PYTEST_ARGS")
    stream_fd = int(fd)
    os.set_inheritable(stream_fd, False)
    here = os.path.dirname(os.path.abspath(__file__))
    # this folder, then the test environment's packages; the interpreter put this folder
    # first (no -P: Python 3.10 has none): it leaves before the repository's paths come
    sys.path[:] = [here, site_packages, *(p for p in sys.path if p != here)]
    import outcome_stream
    import pytest

    sys.path[:] = [p for p in sys.path if p != here]
    functions = [*vars(outcome_stream).values(), *vars(outcome_stream.OutcomeStream).values()]
    guarded = frozenset(id(f) for f in functions if type(f) is FunctionType)
    sys.addaudithook(_guard(stream_fd, guarded))
    sys.path[:0] = [p for p in paths.split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = paths  # for the processes the tests start
    return int(pytest.main(args, plugins=[outcome_stream.OutcomeStream(stream_fd)]))


def _guard(fd: int, guarded: frozenset[int]) -> Callable[[str, tuple], None]:
    """The audit hook: its state lives in this closure, which only the interpreter can reach;
    every name it calls is bound here, before any code of the repository's runs."""
    write, ident, kind, names, count, snapshot = os.write, id, type, vars, len, tuple
    attribute, module, flag, apply = getattr, ModuleType, bool, map
    encode, refused, code_attributes = encode_basestring_ascii, REFUSED, CODE_ATTRIBUTES
    missing = object()
    # (label, owner, the attributes watched (none: all, and no new one), their values, the
    # values' ids in order: unchanged namespaces are compared at C speed)
    pins: list[
        tuple[str, object, tuple[str, ...], tuple[tuple[str, object], ...], tuple[int, ...]]
    ] = []
    pinned: set[int] = set()
    sealed: list[bool] = []
    told: set[str] = set()

    def tell(evidence: str) -> None:
        if evidence not in told:
            told.add(evidence)
            data = ('{"tampered": ' + encode(evidence) + "}\n").encode("ascii")
            while data:
                data = data[write(fd, data) :]

    def changed() -> str:
        for label, owner, watched, attributes, same in pins:
            if watched:  # some attributes, of an object that may have no __dict__
                for name, value in attributes:
                    if attribute(owner, name, missing) is not value:
                        return f"{label}.{name} was replaced"
                continue
            namespace = names(owner)
            # the pinned values are held here, so no other object can have their ids
            if snapshot(apply(ident, namespace.values())) == same:
                continue
            for name, value in attributes:
                if namespace.get(name, missing) is not value:
                    return f"{label}.{name} was replaced"
            if count(namespace) != count(attributes):
                known = {name for name, _ in attributes}
                for name, value in namespace.items():
                    # a submodule imported later, a flag pytest sets on a class (a warning
                    # shown) or a warning's registry may be new
                    if name in known or name == "__warningregistry__":
                        continue
                    if kind(value) is not module and kind(value) is not flag:
                        return f"{label}.{name} was added"
        return ""

    def pin(label: str, owner: object, watched: tuple[str, ...]) -> None:
        if sealed:
            tell(f"{label} pinned after the session started")
        elif ident(owner) not in pinned:
            pinned.add(ident(owner))
            if watched:
                attributes = snapshot((name, attribute(owner, name, missing)) for name in watched)
            else:
                attributes = snapshot(names(owner).items())
            same = snapshot(apply(ident, (value for _, value in attributes)))
            pins.append((label, owner, watched, attributes, same))

    def hook(event: str, args: tuple) -> None:
        if event == "foundry.check":
            evidence = changed()
            if evidence:
                tell(evidence)
        elif event == "foundry.pin":
            pin(*args)
        elif event == "foundry.seal":
            sealed.append(True)
        elif event in refused:
            tell(f"audit event {event}")
            raise PermissionError(f"{event} is not allowed under the grader")
        elif event == "ctypes.dlsym" and kind(args[1]) is str and args[1].startswith(("Py", "_Py")):
            tell(f"audit event {event}: {args[1]}")
            raise PermissionError("the Python C API is not allowed under the grader")
        elif event in ("object.__setattr__", "object.__delattr__") and ident(args[0]) in guarded:
            if args[1] in code_attributes:
                tell(f"the grader's function {args[0]!r} was given new {args[1]}")
                raise PermissionError("the grader's functions are not to be changed")
        elif event == "open" and kind(args[0]) is str and args[0][:6] + args[0][-4:] == PROC_MEM:
            tell(f"opened {args[0]}")
            raise PermissionError("process memory is not allowed under the grader")

    return hook


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
