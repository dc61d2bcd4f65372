// The SIMD builds really contain SIMD128 code and the scalar build none, read from the binaries
// with binaryen's wasm-dis.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';

import { REPO_ROOT } from './helpers.js';

const WASM_DIS = '/usr/bin/wasm-dis';

async function disassemble(build) {
  const { stdout } = await promisify(execFile)(WASM_DIS, [join(REPO_ROOT, 'dist', `attention-${build}.wasm`)], {
    maxBuffer: 512 * 2 ** 20,
  });
  assert.match(stdout, /^\(module/m, 'wasm-dis printed a module');
  return stdout;
}

// Top-level functions as { name, body }; names are `$<index>` when the build has no name section.
function functions(text) {
  return text
    .split(/\n(?= \(func )/)
    .filter((chunk) => chunk.startsWith(' (func '))
    .map((body) => ({ name: body.match(/^ \(func \$(\S+)/)[1], body }));
}

const SIMD_OPS = ['f32x4.mul', 'f32x4.add', 'v128.load'];

for (const build of ['simd', 'threads']) {
  test(`the ${build} build contains SIMD128 instructions`, async () => {
    const text = await disassemble(build);
    for (const op of SIMD_OPS) assert.ok(text.includes(op), `${op} in attention-${build}.wasm`);

    const funcs = functions(text);
    assert.ok(funcs.length > 10, 'functions found');
    // With a name section, the kernels themselves must be the vectorised ones.
    const kernels = funcs.filter((f) => f.name.includes('wasmsimd'));
    const named = funcs.some((f) => !/^\d+$/.test(f.name));
    if (named) {
      assert.ok(kernels.length > 0, 'the named build has wasmsimd kernels');
      const kernelText = kernels.map((f) => f.body).join('\n');
      for (const op of SIMD_OPS) assert.ok(kernelText.includes(op), `${op} inside the wasmsimd kernels`);
    }
  });
}

test('the scalar build contains no SIMD128 at all', async () => {
  const text = await disassemble('scalar');
  assert.ok(functions(text).length > 10, 'functions found');
  assert.doesNotMatch(text, /v128|f32x4|i32x4|i8x16|i16x8|i64x2|f64x2/);
});
