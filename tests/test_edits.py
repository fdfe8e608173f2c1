"""Reading a solver's edits from its reply, and applying them inside the sandbox."""

from __future__ import annotations

import pytest

from data.runtime.edits import (
    EditError,
    apply_edits,
    file_diff,
    parse_edits,
    split_diff,
    split_steps,
)
from data.runtime.sandbox import Limits, Sandbox

OLD = "def add(a, b):\n    raise NotImplementedError\n"
NEW = "def add(a, b):\n    return a + b\n"


def test_whole_files_in_fenced_blocks_with_a_file_header():
    reply = f"Here you go.\n\n```python\n# file: src/calc.py\n{NEW}```\n\n```\nnot a file\n```"
    edits = parse_edits(reply)
    assert edits.files == {"src/calc.py": NEW} and not edits.diffs


def test_a_unified_diff_fenced_or_bare_is_split_by_file():
    diff = file_diff("src/calc.py", OLD, NEW) + file_diff("tests/test_calc.py", "", "x = 1\n")
    for reply in (f"```diff\n{diff}```", f"The fix:\n{diff}"):
        edits = parse_edits(reply)
        assert edits.paths == ["src/calc.py", "tests/test_calc.py"]
        assert "+    return a + b" in edits.diffs["src/calc.py"]


def test_a_new_file_diff_is_named_by_its_new_path():
    assert list(split_diff(file_diff("pkg/new.py", "", "x = 1\n"))) == ["pkg/new.py"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I would rewrite the function.", "no_edits"),
        ("```python\nprint('no header')\n```", "no_edits"),
        ("```python\n# file: ../outside.py\nx = 1\n```", "unsafe_path"),
        ("```python\n# file: /etc/passwd\nx = 1\n```", "unsafe_path"),
        ("```python\n# file: .git/hooks/pre-commit\nx = 1\n```", "unsafe_path"),
    ],
)
def test_replies_without_usable_edits_say_why(reply, reason):
    with pytest.raises(EditError) as raised:
        parse_edits(reply)
    assert raised.value.reason == reason


def test_test_files_are_set_aside():
    reply = f"```python\n# file: src/calc.py\n{NEW}```\n```python\n# file: tests/test_calc.py\n```"
    kept, dropped = parse_edits(reply).without(lambda path: path.startswith("tests/"))
    assert kept.paths == ["src/calc.py"] and dropped == ["tests/test_calc.py"]


def test_edits_apply_in_the_sandbox_and_a_bad_diff_is_reported(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "calc.py").write_text(OLD.rstrip("\n"))  # no newline at the end
    diff = file_diff("src/calc.py", OLD.rstrip("\n"), NEW)
    with Sandbox(tmp_path, Limits(wall_s=30)) as sandbox:
        assert apply_edits(sandbox, parse_edits(diff)) is None
        assert (sandbox.tree / "src" / "calc.py").read_text() == NEW
        assert apply_edits(sandbox, parse_edits(diff)) is not None  # applied twice: rejected
        whole = parse_edits(f"```\n# file: src/extra/new.py\n{NEW}```")
        assert apply_edits(sandbox, whole) is None
        assert (sandbox.tree / "src" / "extra" / "new.py").read_text() == NEW
    assert (tmp_path / "src" / "calc.py").read_text() == OLD.rstrip("\n")  # the original stays


def test_a_reply_splits_into_its_steps():
    reply = "Plan first.\n## Step 2\nsecond\n### step 1: parse\nfirst\n## Step 9\nignored\n"
    assert split_steps(reply, 2) == ["\nfirst\n", "\nsecond\n"]
    assert split_steps("no headings at all", 2) == ["", ""]
