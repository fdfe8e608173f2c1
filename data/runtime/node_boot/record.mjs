// record.mjs: loaded by `--import` before a test file of the reference runs; writes down each
// call the test file's code makes into a function the tree's own modules export, for the grader
// to replay later on an attempt, outside any test run (`replay.mjs`).
//
// A module of the tree (not a test file, not under node_modules) imported or required by a test
// file is given to it through a facade: the module's exports, with each exported function (not a
// class) wrapped. A wrapped call is one JSON line down the pipe FOUNDRY_RECORD_FD: the test file,
// the module (its path in the tree) and function, its arguments in the form `values.mjs` rebuilds
// and what it returned (a promise: what it settled to) or the classes of what it threw. A call
// whose arguments could not be rebuilt in another process (a class instance, a callback) is not
// written. Modules the tree's own code imports are the real ones: only the tests' calls count.
//
// This runs the reference, which has no reason to forge its own record: there is no guard here.
'use strict';
import fs from 'node:fs';
import { createRequire, registerHooks } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { encode, isPromise, raised, Unrebuildable } from './values.mjs';

const FD = Number(process.env.FOUNDRY_RECORD_FD);
const TREE = process.cwd() + path.sep;
const TESTS = new Set(JSON.parse(fs.readFileSync(process.env.FOUNDRY_TEST_FILES, 'utf8')).map((p) => path.resolve(p)));
delete process.env.FOUNDRY_RECORD_FD;
delete process.env.FOUNDRY_TEST_FILES;
const FACADE = '.foundry-recorded'; // a facade's URL: its module's, with this added
const HERE = import.meta.url;
const require = createRequire(HERE);
const testFile = path.relative(TREE, path.resolve(process.argv[1] || ''));

const fileOf = (url) => (typeof url === 'string' && url.startsWith('file:') ? fileURLToPath(url.split('?')[0]) : '');
// a facade is a module of its own (its own file name: CommonJS caches modules by file name)
const isTest = (url) => TESTS.has(fileOf(url));
const isSource = (url) => {
  const file = fileOf(url);
  return file.startsWith(TREE) && !file.split(path.sep).includes('node_modules') && !TESTS.has(file) && !file.endsWith(FACADE);
};

registerHooks({
  resolve(specifier, context, next) {
    const found = next(specifier, context);
    if (isTest(context.parentURL) && isSource(found.url)) {
      return { ...found, url: found.url + FACADE, shortCircuit: true };
    }
    return found;
  },
  load(url, context, next) {
    if (!url.endsWith(FACADE)) return next(url, context);
    const real = url.slice(0, -FACADE.length);
    const module = path.relative(TREE, fileURLToPath(real)).split(path.sep).join('/');
    const common = isCommonJS(fileURLToPath(real));
    const source = common ? commonFacade(real, module) : moduleFacade(real, module);
    return { format: common ? 'commonjs' : 'module', source, shortCircuit: true };
  },
});

/** Whether the file at `file` is a CommonJS module, as Node decides it: by its extension, or
 * for `.js` and `.ts` by the `type` of the nearest package.json. */
function isCommonJS(file) {
  if (/\.c[jt]s$/.test(file)) return true;
  if (/\.m[jt]s$/.test(file)) return false;
  for (let folder = path.dirname(file); ; folder = path.dirname(folder)) {
    const manifest = path.join(folder, 'package.json');
    if (fs.existsSync(manifest)) {
      try {
        return JSON.parse(fs.readFileSync(manifest, 'utf8')).type !== 'module';
      } catch {
        return true;
      }
    }
    if (folder === path.dirname(folder)) return true;
  }
}

/** An ES module giving the real module's exports, its functions wrapped. Its export names are
 * read from the real module, loaded with require (which shares the module with import). */
function moduleFacade(real, module) {
  const namespace = require(fileURLToPath(real));
  const at = (text) => JSON.stringify(text);
  let source = `import * as real from ${at(real)};\nimport { wrapped } from ${at(HERE)};\nexport * from ${at(real)};\n`;
  for (const [number, name] of Object.keys(namespace).entries()) {
    if (!isFunction(namespace[name])) continue;
    const value = `wrapped(real[${at(name)}], ${at(module)}, ${at(name)})`;
    source += name === 'default' ? `export default ${value};\n` : `const _${number} = ${value};\nexport { _${number} as ${at(name)} };\n`;
  }
  if ('default' in namespace && !isFunction(namespace.default)) source += 'export default real.default;\n';
  return source;
}

/** A CommonJS module giving the real module's exports, its functions wrapped. */
function commonFacade(real, module) {
  const at = (text) => JSON.stringify(text);
  return `const { facade } = require(${at(fileURLToPath(HERE))});\nmodule.exports = facade(require(${at(fileURLToPath(real))}), ${at(module)});\n`;
}

const isFunction = (value) => typeof value === 'function' && !/^class\b/.test(Function.prototype.toString.call(value));

/** CommonJS exports with their functions wrapped: a function itself, or an object's own. */
export function facade(exports, module) {
  if (isFunction(exports)) return Object.assign(wrapped(exports, module, 'module.exports'), exports);
  if (exports === null || typeof exports !== 'object') return exports;
  const copy = Object.create(Object.getPrototypeOf(exports));
  for (const name of Object.keys(exports)) {
    copy[name] = isFunction(exports[name]) ? wrapped(exports[name], module, name) : exports[name];
  }
  return copy;
}

/** `original`, writing down each call made through it. */
export function wrapped(original, module, name) {
  if (!isFunction(original)) return original;
  return function recorded(...args) {
    let inputs;
    try {
      inputs = encode(args, true);
    } catch (error) {
      if (error instanceof Unrebuildable || error instanceof RangeError) return Reflect.apply(original, this, args);
      throw error;
    }
    const call = { test: testFile, module, function: name, args: { tuple: inputs.list }, kwargs: { dict: [] } };
    let result;
    try {
      result = Reflect.apply(original, this, args);
    } catch (error) {
      write({ ...call, raises: raised(error) });
      throw error;
    }
    if (isPromise(result)) {
      return result.then(
        (value) => {
          write({ ...call, returns: { promise: { resolves: outcome(value) } } });
          return value;
        },
        (error) => {
          write({ ...call, returns: { promise: { rejects: raised(error) } } });
          throw error;
        },
      );
    }
    write({ ...call, returns: outcome(result) });
    return result;
  };
}

function outcome(value) {
  try {
    return encode(value);
  } catch (error) {
    return { opaque: String(error && error.name) };
  }
}

function write(record) {
  let data = Buffer.from(JSON.stringify(record) + '\n');
  while (data.length) data = data.subarray(fs.writeSync(FD, data));
}
