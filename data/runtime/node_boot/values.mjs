// values.mjs: JavaScript values as JSON, in the forms `pytest_boot/values.py` writes, for the
// calls the grader records and replays outside a test run (`record.mjs`, `replay.mjs`). A call's
// arguments must come back as the same values in another process (`encode(v, true)`, then
// `decode`); a result only needs a form the grader can compare outside (`encode(v)`).
//
// Plain JSON stands for null, booleans, safe integers and strings; every other value is an
// object with one tag: `float` (its text, or `nan`, `inf`, `-inf`), `bigint`, `undefined`,
// `list` (an array), `tuple` (a call's argument list), `dict` (a plain object, as pairs),
// `map`, `set`, `datetime` (a Date, ISO text), `bytes` (hex). A result may also be an
// `object` (its class and own fields), a `promise` (what it settled to: `resolves` a value or
// `rejects` with classes) or `opaque` (its class alone: a function, a symbol, a cycle).
// This file runs inside the sandbox and imports nothing.
'use strict';

const MAX_DEPTH = 12;
const MAX_ITEMS = 2000;

export class Unrebuildable extends Error {}

// the built-ins used here, taken when this module loads, before any code of the tree's: code
// that patches them later does not change how a value is written
const { getPrototypeOf, keys, is, defineProperty, getOwnPropertyDescriptor } = Object;
const { isArray, from: arrayFrom } = Array;
const { isSafeInteger, isNaN: notANumber } = Number;
const { stringify } = JSON;
const bufferFrom = Buffer.from;
const toISO = Date.prototype.toISOString;
const timeOf = Date.prototype.getTime;
const sortItems = Array.prototype.sort;
const toText = BigInt.prototype.toString;
const then = Promise.prototype.then;

/** Whether `value` is a promise of Node's own (a brand check: an object that only claims to be
 * one, a Proxy or a thenable, is not), so that awaiting it runs none of its code. */
export function isPromise(value) {
  if (value === null || typeof value !== 'object') return false;
  try {
    then.call(value, undefined, () => {});
    return true;
  } catch {
    return false;
  }
}

/** What the promise `value` settles to, through Node's own `then`: `[true, value]` or
 * `[false, error]`. */
export function settlement(value) {
  return new Promise((resolve) => {
    then.call(value, (resolved) => resolve([true, resolved]), (error) => resolve([false, error]));
  });
}
const isPlain = (value) => {
  const proto = getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
};

/** The name of `value`'s class (its constructor's), `Object` where it has none. */
export function className(value) {
  const made = value == null ? undefined : value.constructor;
  return typeof made === 'function' && typeof made.name === 'string' && made.name ? made.name : 'Object';
}

/** The classes of what a call threw, most derived first, `Object` left out; a thrown value that
 * is not an object is named by its type (`thrown string`). */
export function raised(error) {
  if (error === null || (typeof error !== 'object' && typeof error !== 'function')) {
    return [`thrown ${error === null ? 'null' : typeof error}`];
  }
  const names = [];
  for (let proto = getPrototypeOf(error); proto && proto !== Object.prototype; proto = getPrototypeOf(proto)) {
    const made = getOwnPropertyDescriptor(proto, 'constructor');
    names.push(made && typeof made.value === 'function' && made.value.name ? made.value.name : '?');
  }
  return names;
}

function opaque(value, rebuildable, why) {
  if (rebuildable) throw new Unrebuildable(`a ${className(value)} ${why}`);
  return { opaque: typeof value === 'object' ? className(value) : typeof value, why };
}

function floatForm(number) {
  if (notANumber(number)) return { float: 'nan' };
  if (number === Infinity) return { float: 'inf' };
  if (number === -Infinity) return { float: '-inf' };
  return { float: String(number) };
}

/** `value` in the JSON form above; with `rebuildable`, throws Unrebuildable for a value
 * `decode` could not make again (a class instance, a function, a cycle). */
export function encode(value, rebuildable = false, depth = 0, seen = new Set()) {
  if (depth > MAX_DEPTH) return opaque(value, rebuildable, 'is too deep');
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return value;
  if (value === undefined) return { undefined: null };
  if (typeof value === 'number') {
    return isSafeInteger(value) && !is(value, -0) ? value : floatForm(value);
  }
  if (typeof value === 'bigint') return { bigint: toText.call(value) };
  if (typeof value !== 'object') return opaque(value, rebuildable, 'cannot be rebuilt');
  if (seen.has(value)) return opaque(value, rebuildable, 'holds itself');
  seen.add(value);
  try {
    return encodeObject(value, rebuildable, depth + 1, seen);
  } finally {
    seen.delete(value);
  }
}

function encodeObject(value, rebuildable, deeper, seen) {
  const inner = (item) => encode(item, rebuildable, deeper, seen);
  if (isArray(value)) {
    if (value.length > MAX_ITEMS) return opaque(value, rebuildable, 'is too large');
    return { list: arrayFrom(value, inner) };
  }
  if (value instanceof Uint8Array) return { bytes: bufferFrom(value.buffer, value.byteOffset, value.byteLength).toString('hex') };
  if (value instanceof Date) {
    return notANumber(timeOf.call(value)) ? opaque(value, rebuildable, 'is an invalid date') : { datetime: toISO.call(value) };
  }
  if (value instanceof Map) {
    if (value.size > MAX_ITEMS) return opaque(value, rebuildable, 'is too large');
    return { map: arrayFrom(value, ([k, v]) => [inner(k), inner(v)]) };
  }
  if (value instanceof Set) {
    if (value.size > MAX_ITEMS) return opaque(value, rebuildable, 'is too large');
    const items = arrayFrom(value, inner);
    return { set: sortItems.call(items, (a, b) => (stringify(a) < stringify(b) ? -1 : 1)) };
  }
  const fields = keys(value);
  if (fields.length > MAX_ITEMS) return opaque(value, rebuildable, 'is too large');
  const pairs = fields.map((key) => [key, inner(value[key])]);
  if (isPlain(value)) return { dict: pairs };
  if (rebuildable) throw new Unrebuildable(`a ${className(value)} cannot be rebuilt`);
  if (value instanceof Error) pairs.push(['message', inner(value.message)]);
  return { object: className(value), state: { dict: pairs } };
}

const FLOATS = { nan: NaN, inf: Infinity, '-inf': -Infinity };

/** The value `encode(value, true)` stands for. */
export function decode(form) {
  if (form === null || typeof form === 'boolean' || typeof form === 'string') return form;
  if (typeof form === 'number') return form;
  if (typeof form !== 'object' || isArray(form)) throw new Error('not an encoded value');
  if ('float' in form) return form.float in FLOATS ? FLOATS[form.float] : Number(form.float);
  if ('bigint' in form) return BigInt(form.bigint);
  if ('undefined' in form) return undefined;
  if ('list' in form) return form.list.map(decode);
  if ('tuple' in form) return form.tuple.map(decode);
  if ('dict' in form) {
    const made = {};
    for (const [key, value] of form.dict) {
      defineProperty(made, String(decode(key)), { value: decode(value), enumerable: true, writable: true, configurable: true });
    }
    return made;
  }
  if ('map' in form) return new Map(form.map.map(([k, v]) => [decode(k), decode(v)]));
  if ('set' in form) return new Set(form.set.map(decode));
  if ('datetime' in form) return new Date(form.datetime);
  if ('bytes' in form) return bufferFrom(form.bytes, 'hex');
  throw new Error(`not a rebuildable value: ${keys(form).join(', ')}`);
}
