"""The outside check's questions for Node trees (`data.runtime.node_calls`): the calls a
JavaScript or TypeScript repository's tests make into its exported functions, recorded on the
reference and replayed without the tests, in the same JSON forms as Python's, so that the
oracle (`data.runtime.outside_check`) compares them the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data.runtime.languages import TypeScript, detect_language, project_files
from data.runtime.node_calls import record_node_calls, replay_node_calls
from data.runtime.outside_check import nudged, same_result, same_value, variants
from data.runtime.sandbox import Limits, Sandbox

LIMITS = Limits(wall_s=30)

ESM = {
    "package.json": '{"name": "fares", "type": "module"}\n',
    "src/fares.js": """export const BASE = 250;
export function fare(stops, child) {
  const full = BASE + stops * 40;
  return child ? Math.floor(full / 2) : full;
}
export async function later(stops) {
  return fare(stops, false);
}
export function zoneOf(stop) {
  if (stop < 0) {
    throw new RangeError(`no stop ${stop}`);
  }
  return stop < 5 ? 'A' : 'B';
}
export class Ticket {}
""",
    "test/fares.test.js": """import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fare, later, zoneOf, Ticket } from '../src/fares.js';

test('fares', async () => {
  assert.equal(fare(2, false), 330);
  assert.equal(fare(3, true), 185);
  assert.equal(await later(1), 290);
  assert.throws(() => zoneOf(-1), RangeError);
  assert.equal(zoneOf(7), 'B');
  assert.ok(new Ticket());
  assert.deepEqual([1, 2].map((n) => fare(n, false)), [290, 330]);
});
""",
}
COMMONJS = {
    "package.json": '{"name": "tally"}\n',
    "src/tally.js": """'use strict';
function count(words) {
  const seen = new Map();
  for (const word of words) {
    seen.set(word, (seen.get(word) || 0) + 1);
  }
  return seen;
}
module.exports = { count, big: (n) => n * 2n };
""",
    "src/one.js": "module.exports = function pair(x) {\n  return [x, x];\n};\n",
    "test/tally.test.js": """const { test } = require('node:test');
const assert = require('node:assert/strict');
const { count, big } = require('../src/tally.js');
const pair = require('../src/one.js');
test('counts', () => {
  assert.deepEqual(count(['a', 'b', 'a']), new Map([['a', 2], ['b', 1]]));
  assert.equal(big(4n), 8n);
  assert.deepEqual(pair(null), [null, null]);
});
""",
}
TYPESCRIPT = {
    "package.json": '{"name": "split", "type": "module"}\n',
    "src/split.ts": """export interface Share {
  who: string;
  cents: number;
}
export function split(cents: number, people: string[]): Share[] {
  const each = Math.floor(cents / people.length);
  return people.map((who): Share => ({ who, cents: each }));
}
export default function dated(day: Date): string {
  return day.toISOString().slice(0, 10);
}
""",
    "test/split.test.ts": """import { test } from 'node:test';
import assert from 'node:assert/strict';
import dated, { split } from '../src/split.ts';
import type { Share } from '../src/split.ts';

test('split', () => {
  const shares: Share[] = split(100, ['a', 'b']);
  assert.deepEqual(shares, [{ who: 'a', cents: 50 }, { who: 'b', cents: 50 }]);
  assert.equal(dated(new Date('2025-02-03T10:00:00Z')), '2025-02-03');
});
""",
}


def project(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def recorded(tree: Path) -> list[dict]:
    with Sandbox(tree, LIMITS) as sandbox:
        return record_node_calls(sandbox, None, [])


def answers_of(calls: list[dict]) -> list[dict]:
    return [{k: call[k] for k in ("returns", "raises") if k in call} for call in calls]


def test_an_es_module_s_exported_calls_are_recorded_with_their_results(tmp_path):
    calls = recorded(project(tmp_path, ESM))
    made = [(c["module"], c["function"], c["args"]) for c in calls]
    assert made == [
        ("src/fares.js", "fare", {"tuple": [2, False]}),
        ("src/fares.js", "fare", {"tuple": [3, True]}),
        ("src/fares.js", "later", {"tuple": [1]}),  # its own call of fare is not the test's
        ("src/fares.js", "zoneOf", {"tuple": [-1]}),
        ("src/fares.js", "zoneOf", {"tuple": [7]}),
        ("src/fares.js", "fare", {"tuple": [1, False]}),  # `new Ticket()`: a class, not wrapped
        ("src/fares.js", "fare", {"tuple": [2, False]}),
    ]
    assert answers_of(calls)[:5] == [
        {"returns": 330},
        {"returns": 185},
        {"returns": {"promise": {"resolves": 290}}},
        {"raises": ["RangeError", "Error"]},
        {"returns": "B"},
    ]


@pytest.mark.parametrize("files", [ESM, COMMONJS, TYPESCRIPT], ids=["esm", "commonjs", "ts"])
def test_the_reference_replayed_without_its_tests_gives_the_recorded_results(tmp_path, files):
    tree = project(tmp_path, files)
    calls = recorded(tree)
    assert calls
    replayed = replay_node_calls(tree, None, calls, LIMITS)
    assert not replayed.tampered
    assert all(
        got is not None and same_result(want, got)
        for want, got in zip(answers_of(calls), replayed.results, strict=True)
    ), (answers_of(calls), replayed.results)


def test_commonjs_and_typescript_values_keep_their_kinds(tmp_path):
    tally = recorded(project(tmp_path / "cjs", COMMONJS))
    assert answers_of(tally) == [
        {"returns": {"map": [["a", 2], ["b", 1]]}},
        {"returns": {"bigint": "8"}},
        {"returns": {"list": [None, None]}},
    ]
    assert [c["function"] for c in tally] == ["count", "big", "module.exports"]
    tree = project(tmp_path / "ts", TYPESCRIPT)
    assert isinstance(detect_language(project_files(tree)), TypeScript)
    split = recorded(tree)
    assert split[1]["function"] == "default"
    assert split[1]["args"] == {"tuple": [{"datetime": "2025-02-03T10:00:00.000Z"}]}


def test_a_wrong_attempt_differs_and_an_unseen_input_is_asked(tmp_path):
    tree = project(tmp_path, ESM)
    calls = recorded(tree)
    asked = [*calls, *(v for call in calls for v in variants(call))]
    assert {"tuple": [3, True]} in [c["args"] for c in asked]
    assert {"tuple": [4, True]} in [c["args"] for c in asked]  # nudged: no test shows it
    reference = replay_node_calls(tree, None, asked, LIMITS)
    wrong = ESM["src/fares.js"].replace("stops * 40", "stops * 41")
    (tree / "src/fares.js").write_text(wrong)
    attempt = replay_node_calls(tree, None, asked, LIMITS)
    differ = [
        call["args"]
        for call, want, got in zip(asked, reference.results, attempt.results, strict=True)
        if not same_result(want, got)
    ]
    assert {"tuple": [4, True]} in differ and {"tuple": [7]} not in differ


def test_answers_written_by_the_attempt_on_the_replay_s_pipe_are_tampering(tmp_path):
    forged = """
const fs = process.getBuiltinModule('node:fs');
if (process.argv[1].endsWith('replay.mjs')) {
  const count = JSON.parse(fs.readFileSync(process.argv[3], 'utf8')).length;
  const answer = (i) => JSON.stringify({ i, returns: 330 }) + '\\n';
  for (let i = 0; i < count; i++) fs.writeSync(Number(process.argv[2]), answer(i));
}
"""
    tree = project(tmp_path, ESM)
    calls = recorded(tree)
    (tree / "src/fares.js").write_text(ESM["src/fares.js"] + forged)
    replayed = replay_node_calls(tree, None, calls, LIMITS)
    assert replayed.tampered.startswith("line ")


def test_a_replay_cannot_read_outside_its_tree(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the expected values")
    spy = f"""
export function peek() {{
  try {{
    return process.getBuiltinModule('node:fs').readFileSync({json.dumps(str(secret))}, 'utf8');
  }} catch (error) {{
    return error.code;
  }}
}}
"""
    tree = project(tmp_path / "tree", ESM)
    (tree / "src/fares.js").write_text(ESM["src/fares.js"] + spy)
    call = {"module": "src/fares.js", "function": "peek", "args": {"tuple": []}}
    replayed = replay_node_calls(tree, None, [{**call, "kwargs": {"dict": []}}], LIMITS)
    assert replayed.results == [{"returns": "ERR_ACCESS_DENIED"}]


def test_node_forms_are_nudged_and_compared_like_python_s():
    assert nudged({"bigint": "8"}) == {"bigint": "9"}
    assert nudged({"map": [["a", 2]]}) == {"map": [["a", 3]]}
    assert nudged({"undefined": None}) is None
    assert same_value({"map": [["a", 1], ["b", 2]]}, {"map": [["b", 2], ["a", 1]]})
    assert not same_value({"map": [["a", 1]]}, {"dict": [["a", 1]]})
    assert same_value({"promise": {"resolves": 2}}, {"promise": {"resolves": {"float": "2.0"}}})
    assert not same_value({"promise": {"resolves": 2}}, {"promise": {"rejects": ["Error"]}})
    assert not same_value({"promise": {"rejects": ["TypeError"]}}, {"promise": {"rejects": []}})
    assert not same_value({"undefined": None}, None)


def test_a_thenable_is_a_value_the_replay_does_not_await(tmp_path):
    # one that resolves to itself would hold the replay for ever: microtasks starve the timer
    forever = """
export function forever() {
  const looping = { then(resolve) { resolve(looping); } };
  return looping;
}
"""
    tree = project(tmp_path, ESM)
    (tree / "src/fares.js").write_text(ESM["src/fares.js"] + forever)
    calls = [
        {
            "module": "src/fares.js",
            "function": name,
            "args": {"tuple": args},
            "kwargs": {"dict": []},
        }
        for name, args in (("forever", []), ("fare", [2, False]), ("later", [1]))
    ]
    replayed = replay_node_calls(tree, None, calls, Limits(wall_s=20))
    assert replayed.results == [
        {"returns": {"dict": [["then", {"opaque": "function", "why": "cannot be rebuilt"}]]}},
        {"returns": 330},
        {"returns": {"promise": {"resolves": 290}}},
    ]
