// replay.mjs: makes recorded calls on a tree that holds no tests and writes down what each
// returned or threw.
//
// Run in the sandbox as `node [permission flags] replay.mjs FD CALLS` in the tree: CALLS is a
// JSON list of calls (`module`, a path in the tree; `function`, an export's name; `args` as
// `record.mjs` wrote them), made in order in this one process, each module imported as the
// tree's code would import it. Each result is one JSON line down FD: `{"i": n, "returns":
// value}` (a promise of Node's own is awaited, through Node's own `then`: what it settled to;
// any other thenable is a value like another), `{"i": n, "raises": [classes]}` or `{"i": n,
// "missing": why}` (the module or export is not there, or cannot be loaded). A promise that has
// not settled after CALL_S is answered as raising TimeoutError; a call that never returns
// holds the process until the grader's time limit, and the calls after it are unanswered.
//
// Nothing this process writes is believed as such: the grader compares the results, outside,
// with the reference's, which never enter the sandbox.
'use strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { decode, encode, isPromise, raised, settlement } from './values.mjs';

const CALL_S = 10;
const [fd, callsFile] = process.argv.slice(2);
const calls = JSON.parse(fs.readFileSync(callsFile, 'utf8'));
// taken before any module of the tree loads: code that patches them later changes nothing here
const writeSync = fs.writeSync;
const stringify = JSON.stringify;
const bufferFrom = Buffer.from;
const race = Promise.race.bind(Promise);

function write(record) {
  let data = bufferFrom(stringify(record) + '\n');
  while (data.length) data = data.subarray(writeSync(Number(fd), data));
}

async function replayed(call) {
  let original, args;
  try {
    const module = await import(pathToFileURL(path.resolve(call.module)).href);
    const exported = module.default !== null && typeof module.default === 'object' ? module.default : {};
    original = call.function === 'module.exports' ? module.default : module[call.function] ?? exported[call.function];
    if (typeof original !== 'function') return { missing: `${call.module} exports no function ${call.function}` };
    args = decode(call.args);
  } catch (error) {
    return { missing: `${error && error.name}: ${error && error.message}`.slice(0, 300) };
  }
  let result;
  try {
    result = original(...args);
  } catch (error) {
    return { raises: raised(error) };
  }
  if (isPromise(result)) {
    return { returns: { promise: await settled(result) } };
  }
  return { returns: safely(result) };
}

async function settled(promise) {
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ rejects: ['TimeoutError', 'Error'] }), CALL_S * 1000);
  });
  try {
    return await race([
      settlement(promise).then(([ok, value]) => (ok ? { resolves: safely(value) } : { rejects: raised(value) })),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function safely(value) {
  try {
    return encode(value);
  } catch (error) {
    return { opaque: String(error && error.name) };
  }
}

for (const [number, call] of calls.entries()) {
  write({ i: number, ...(await replayed(call)) });
}
