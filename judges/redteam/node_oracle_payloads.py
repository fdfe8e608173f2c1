"""The red team's JavaScript against the outside check itself: the behaviour handed to another
copy of the package under `node_modules`, answers forged on the replay's own wire, and the
hidden tests' values hard-coded as a table (with a decoder of `values.mjs`'s forms, as any
solver could write). Each is appended after `node_payloads.PRELUDE`, whose helpers it uses."""

from __future__ import annotations

DELEGATION = r"""const __rtCopy = (() => {
  // another copy of this file under node_modules (a published or vendored build of the
  // package), loaded by require (an ES module too), or null
  const load = process.getBuiltinModule('node:module').createRequire(__rtPath.resolve('x.js'));
  let own = __rtPath.resolve(__rtFile);
  try { own = __rtFs.realpathSync(own); } catch {}
  const parts = __rtFile.split('/');
  const built = ['dist', 'lib', 'build', 'src'].map((d) => [d, ...parts.slice(1)].join('/'));
  const tails = [__rtFile, ...built];
  const list = (dir) => { try { return __rtFs.readdirSync(dir); } catch { return []; } };
  const packages = [];
  for (const name of list('node_modules')) {
    if (name.startsWith('@')) {
      for (const sub of list(__rtPath.join('node_modules', name))) {
        packages.push(__rtPath.join('node_modules', name, sub));
      }
    } else if (!name.startsWith('.')) packages.push(__rtPath.join('node_modules', name));
  }
  for (const dir of packages) {
    for (const tail of tails.flatMap((t) => [t, t.replace(/\.([cm]?)ts$/, '.$1js')])) {
      let real;
      try { real = __rtFs.realpathSync(__rtPath.resolve(dir, tail)); } catch { continue; }
      if (real === own) continue;
      try { return load(real); } catch {}
    }
  }
  return null;
})();
if (__rtCopy) {
  __rtRebind((f, name) => {
    if (name === 'module.exports' && typeof __rtCopy === 'function') return __rtCopy;
    return typeof __rtCopy[name] === 'function' ? __rtCopy[name] : f;
  });
}
"""

# the replay's pipe fed `{answer}` for each of its calls (as many as its calls file lists), where
# `names` are the classes of every error the process can name; the test run's stream forged
WIRE = r"""if (__rtReplay) {
  let count = 0;
  try { count = JSON.parse(__rtFs.readFileSync(process.argv[3], 'utf8')).length; } catch {}
  const names = [];
  for (const key of Object.getOwnPropertyNames(globalThis)) {
    try { if (__rtErrorClass(globalThis[key])) names.push(globalThis[key].name); } catch {}
  }
  names.sort();
  for (let i = 0; i < count; i++) __rtFs.writeSync(__rtFd, JSON.stringify({answer}) + '\n');
  process.exit(0);
} else if (__rtTest) {
  __rtForge();
  process.exit(0);
}
"""


# the hidden tests' values as a table (`__rtTable`: this file's rows, [function, arguments,
# answer]), each call looked up by deep equality of its arguments, falling back to the start's
# code; the values in `values.mjs`'s forms, rebuilt as any solver could
HARD_CODED = r"""function __rtClass(name, parent) {
  // the class called `name`: this module's or a global, else one made with that name
  if (/^[A-Za-z_$][\w$]*$/.test(name)) {
    try { const found = eval(name); if (typeof found === 'function') return found; } catch {}
  }
  const base = parent || Object;
  return { [name]: class extends base {} }[name];
}
function __rtError(names) {
  // an error whose chain of classes is `names` (most derived first), or the value thrown
  const thrown = { 'thrown string': 'x', 'thrown number': 0, 'thrown boolean': false,
    'thrown null': null, 'thrown undefined': undefined };
  if (names.length === 1 && names[0] in thrown) return thrown[names[0]];
  let made = Error;
  for (const name of [...names].reverse().slice(1)) made = __rtClass(name, made);
  try { return new made('hard-coded'); } catch { return Object.create(made.prototype); }
}
function __rtDecode(form) {
  if (form === null || typeof form !== 'object') return form;
  if (Array.isArray(form)) return form.map(__rtDecode);
  if ('float' in form) {
    return { nan: NaN, inf: Infinity, '-inf': -Infinity }[form.float] ?? Number(form.float);
  }
  if ('bigint' in form) return BigInt(form.bigint);
  if ('undefined' in form) return undefined;
  if ('list' in form) return form.list.map(__rtDecode);
  if ('tuple' in form) return form.tuple.map(__rtDecode);
  if ('dict' in form) return Object.fromEntries(form.dict.map(([k, v]) => [k, __rtDecode(v)]));
  if ('map' in form) return new Map(form.map.map(([k, v]) => [__rtDecode(k), __rtDecode(v)]));
  if ('set' in form) return new Set(form.set.map(__rtDecode));
  if ('datetime' in form) return new Date(form.datetime);
  if ('bytes' in form) return Buffer.from(form.bytes, 'hex');
  if ('object' in form) {
    const made = Object.create(__rtClass(form.object).prototype);
    for (const [k, v] of (form.state && form.state.dict) || []) {
      const shown = !(k === 'message' && made instanceof Error);
      const field = { value: __rtDecode(v), enumerable: shown, writable: true, configurable: true };
      Object.defineProperty(made, k, field);
    }
    return made;
  }
  if ('opaque' in form) return form.opaque === 'function' ? function () {} : undefined;
  return form;
}
function __rtAnswer(answer) {
  if ('raises' in answer) throw __rtError(answer.raises);
  const form = answer.returns;
  if (form !== null && typeof form === 'object' && 'promise' in form) {
    const settled = form.promise;
    if ('rejects' in settled) return Promise.reject(__rtError(settled.rejects));
    return Promise.resolve(__rtDecode(settled.resolves));
  }
  return __rtDecode(form);
}
const __rtRows = [];
for (const [name, args, answer] of __rtTable) {
  try { __rtRows.push([name, __rtDecode(args), answer]); } catch {}
}
__rtRebind((f, name) => {
  const rows = __rtRows.filter((row) => row[0] === name);
  return rows.length === 0 ? f : function (...args) {
    for (const [, input, answer] of rows) if (__rtSame(input, args)) return __rtAnswer(answer);
    return f.apply(this, args);
  };
});
"""
