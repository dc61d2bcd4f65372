// `node scripts/relax-wasm.mjs FILE.wasm`: turns a relaxed build's calls to the imported
// attention_relaxed_madd_f32x4 into the f32x4.relaxed_madd instruction, in place (why: see
// src/kernels/relaxed_madd.h). Both have the stack signature [v128 v128 v128] -> [v128], so each
// call is replaced one for one. Uses wabt (Debian's `wabt`) to go through the text format.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [file] = process.argv.slice(2);
if (!file) {
  console.error('usage: node scripts/relax-wasm.mjs FILE.wasm');
  process.exit(2);
}

const dir = mkdtempSync(join(tmpdir(), 'relax-wasm-'));
try {
  const wat = join(dir, 'module.wat');
  execFileSync('wasm2wat', ['--enable-all', file, '-o', wat]);
  const text = readFileSync(wat, 'utf8');

  // Emscripten minifies import names in release builds, so the import is found by its signature,
  // which no other import of ours has.
  const maddTypes = new Set(
    [...text.matchAll(/^ {2}\(type \(;(\d+);\) \(func \(param v128 v128 v128\) \(result v128\)\)\)$/gm)].map((m) => m[1]),
  );
  const imports = [...text.matchAll(/^ {2}\(import "[^"]*" "[^"]*" \(func (\S+) \(type (\d+)\)\)\)$/gm)].filter((m) =>
    maddTypes.has(m[2]),
  );
  if (imports.length !== 1) throw new Error(`${file}: expected one imported [v128 v128 v128] -> [v128] function, found ${imports.length}`);
  // `(;12;)` when the module has no names, `$name` when it has.
  const callee = imports[0][1].replace(/^\(;(\d+);\)$/, '$1');
  const escaped = callee.replace(/[$.*+?^()[\]{}|\\]/g, '\\$&');
  let calls = 0;
  // One instruction a line; the last of a function carries the function's closing parentheses.
  const relaxed = text.replace(new RegExp(`^(\\s*)call ${escaped}(\\)*)$`, 'gm'), (_, indent, closing) => {
    calls += 1;
    return `${indent}f32x4.relaxed_madd${closing}`;
  });
  if (calls === 0) throw new Error(`${file}: no call to the relaxed multiply-add import`);
  // Any other use (a tail call, a function reference, a table or export entry) would still reach
  // the stand-in.
  const otherUse = new RegExp(`(return_call|ref\\.func|\\(func) ${escaped}\\b|^ {2}\\(elem .*\\bfunc\\b.* ${escaped}\\b`, 'm');
  if (otherUse.test(relaxed.replace(imports[0][0], ''))) throw new Error(`${file}: the relaxed multiply-add import is used other than by call`);

  writeFileSync(wat, relaxed);
  execFileSync('wat2wasm', ['--enable-all', wat, '-o', file]);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
