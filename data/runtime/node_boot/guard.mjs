// guard.mjs: loaded (via a secret data: URL, see driver) by `--import` before any code of the
// repository runs in a node:test process; reports each test's outcome down a pipe whose
// records carry a per-process key the tested code never sees.
//
// Trust model: the code under test shares this process. What it could forge, and how not:
// - fd 1/2 output (TAP, v8 frames): ignored; outcomes travel only on OUT_FD, each record
//   prefixed with the key read from KEY_FD (then closed) at load time;
// - writing to OUT_FD itself: the key is unknown to it, a record without it is tampering;
// - calling this reporter with a fake event source: the reporter is handed out once
//   (`claim`), to the data: module whose URL (secret nonce) only the command line has;
// - rewriting events on their way here (stream, events and async-iterator prototypes),
//   hollowing out node:test's `it`/`test` or node:assert: those objects are frozen first;
// - reading the key out of memory: heap snapshots and process reports are refused here;
//   /proc, the inspector, workers, child processes, addons by Node's permission model.
'use strict';
import fs from 'node:fs';
import v8 from 'node:v8';
import assert from 'node:assert';
import assertStrict from 'node:assert/strict';
import test from 'node:test';
import stream from 'node:stream';
import EventEmitter from 'node:events';
import Module from 'node:module';

const { writeSync, readSync, closeSync } = fs;
const { freeze, getPrototypeOf, getOwnPropertyNames, getOwnPropertySymbols, getOwnPropertyDescriptor, defineProperty, isFrozen } = Object;
const stringify = JSON.stringify;
const ReflectApply = Reflect.apply;
const env = process.env;
const KEY_FD = Number(env.FOUNDRY_KEY_FD), OUT_FD = Number(env.FOUNDRY_OUT_FD);
delete env.FOUNDRY_KEY_FD; delete env.FOUNDRY_OUT_FD;
// the secret data: URL (this guard's reporter) is on the command line: hide it from the code
// under test (/proc/self/cmdline is closed to it by the permission model)
{
  const shown = [];
  for (const arg of process.execArgv) if (!arg.includes('data:')) shown[shown.length] = arg;
  Object.defineProperty(process, 'execArgv', { __proto__: null, value: Object.freeze(shown), writable: false, configurable: false, enumerable: true });
}

const buf = Buffer.alloc(64);
const keyLength = readSync(KEY_FD, buf, 0, 64, null);
closeSync(KEY_FD);
const KEY = buf.toString('latin1', 0, keyLength);
buf.fill(0);
let tampers = 0;

function send(record) {
  // key + JSON of a null-prototype record of primitives: no user code runs on the way
  writeSync(OUT_FD, KEY + '\t' + stringify(record) + '\n');
}
function tamper(why) {
  tampers++;
  send({ __proto__: null, e: 'tampered', why: '' + why });
}

// --- freeze what the verdict goes through, with derived overrides (assignment to a subclass
// prototype still works: the "override mistake" would break `Sub.prototype.emit = f`)
function tamperProof(object) {
  if (object == null || !Object.isExtensible(object)) return;
  for (const key of [...getOwnPropertyNames(object), ...getOwnPropertySymbols(object)]) {
    const d = getOwnPropertyDescriptor(object, key);
    if (!('value' in d) || key === 'prototype') continue;
    if (!d.configurable) { if (d.writable) unguarded.push(key); continue; }
    const value = d.value;
    defineProperty(object, key, {
      __proto__: null, enumerable: d.enumerable, configurable: false,
      get() { return value; },
      set(v) {
        if (this === object) { tamper(`assignment to a frozen ${typeof key === 'symbol' ? key.toString() : key}`); return; }
        defineProperty(this, key, { __proto__: null, value: v, writable: true, enumerable: true, configurable: true });
      },
    });
  }
  Object.preventExtensions(object);
}
const unguarded = [];
function freezeExports(root) {
  tamperProof(root);
  for (const key of getOwnPropertyNames(root)) {
    const v = getOwnPropertyDescriptor(root, key);
    const value = v.get ? v.get() : v.value;
    if (typeof value === 'function' && key !== 'prototype' && key !== 'mock') tamperProof(value);
  }
}
const refuse = (what) => function refused() { tamper(what); throw new Error(`${what} is not allowed under the grader`); };
for (const name of ['getHeapSnapshot', 'writeHeapSnapshot', 'setHeapSnapshotNearHeapLimit', 'getHeapCodeStatistics']) {
  if (name in v8) defineProperty(v8, name, { __proto__: null, value: refuse(`v8.${name}`), writable: false, configurable: false });
}
for (const name of ['register', 'registerHooks']) {
  defineProperty(Module, name, { __proto__: null, value: refuse(`module.${name}`), writable: false, configurable: false });
}
defineProperty(process, 'report', { __proto__: null, value: freeze({ __proto__: null, getReport: refuse('process.report'), writeReport: refuse('process.report') }), configurable: false, writable: false });
Module.syncBuiltinESMExports();

const asyncGen = async function* () {};
const asyncGenProto = getPrototypeOf(asyncGen.prototype);
for (const o of [
  asyncGenProto, getPrototypeOf(asyncGenProto), getPrototypeOf(asyncGen),
  Promise.prototype, Promise,
  EventEmitter.prototype, stream.Stream.prototype, stream.Readable.prototype, stream.Writable.prototype,
  stream.Duplex.prototype, stream.Transform.prototype, stream.PassThrough.prototype,
]) tamperProof(o);
freezeExports(test);
freezeExports(assert);
freezeExports(assertStrict);

// --- the reporter: counts and sends node:test's events
const own = (o, k) => { const d = o == null ? undefined : getOwnPropertyDescriptor(o, k); return d && 'value' in d ? d.value : undefined; };
let reporterClaimed = false, reporterStarted = 0;
let passed = 0, failed = 0, dequeued = 0, finished = 0;
const path = [];

async function* reporter(source) {
  if (reporterStarted++) { tamper('the reporter was started twice'); return; }
  for await (const ev of source) {
    const type = own(ev, 'type'), data = own(ev, 'data');
    const nesting = own(data, 'nesting'), name = '' + own(data, 'name');
    if (type === 'test:dequeue') { dequeued++; continue; }
    if (type === 'test:start') { path.length = nesting; path[nesting] = name; continue; }
    if (type !== 'test:pass' && type !== 'test:fail') continue;
    finished++;
    const details = own(data, 'details');
    const kind = own(details, 'type') === 'suite' ? 'suite' : 'test';
    let outcome = type === 'test:pass' ? 'passed' : 'failed';
    if (own(data, 'skip') !== undefined) outcome = 'skipped';
    if (own(data, 'todo') !== undefined) outcome = 'todo';
    if (outcome === 'passed') passed++; else if (outcome === 'failed') failed++;
    path.length = nesting;
    let id = '';
    for (let i = 0; i < nesting; i++) id += path[i] + ' > ';
    send({ __proto__: null, e: outcome, kind, path: id + name, file: '' + own(data, 'file'), line: own(data, 'line') | 0 });
  }
}
export function claim() {
  if (reporterClaimed) { tamper('the reporter was claimed twice'); return async function* () {}; }
  reporterClaimed = true;
  return reporter;
}
let ended = false;
process.on('exit', () => {
  if (ended) tamper('exit seen twice');
  ended = true;
  send({ __proto__: null, e: 'end', passed, failed, dequeued, finished, tampers, reporter: reporterStarted });
});
send({ __proto__: null, e: 'start' });
