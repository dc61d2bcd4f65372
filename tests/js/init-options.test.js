// init()'s loading options: wasmBinary (bytes for the build init picks, or per build) and
// wasmBaseUrl, with the errors bad values give.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { AttentionError, init } from '../../dist/index.mjs';

const dist = new URL('../../dist/', import.meta.url);
const bytesOf = (build) => readFile(new URL(`attention-${build}.wasm`, dist));

// d = 1: query 1 scores keys [0, 1] as [0, 2] (causal), so its output is 10 e² / (1 + e²).
function check(attn) {
  const t = (values) => ({ shape: [2, 1], data: Float32Array.from(values) });
  const { output } = attn.scaledDotProductAttention(t([1, 2]), t([0, 1]), t([0, 10]), { isCausal: true });
  const e2 = Math.exp(2);
  assert.ok(Math.abs(output.data[1] - (10 * e2) / (1 + e2)) < 1e-4, `output ${output.data}`);
}

function assertAttentionError(argument, pattern) {
  return (error) => {
    assert.ok(error instanceof AttentionError, `an AttentionError, got ${error}`);
    assert.equal(error.argument, argument);
    assert.equal(error.code, 'INVALID_ARGUMENT');
    assert.match(error.message, pattern);
    return true;
  };
}

test('wasmBinary: the bytes of the build init picks, as a Uint8Array or an ArrayBuffer', async () => {
  const simd = await bytesOf('simd');
  const attn = await init({ wasmBinary: simd });
  assert.equal(attn.features.simd, true);
  check(attn);
  const copy = new Uint8Array(simd).buffer;
  check(await init({ wasmBinary: copy }));
  const scalar = await init({ simd: false, wasmBinary: await bytesOf('scalar') });
  assert.equal(scalar.features.simd, false);
  check(scalar);
});

test('wasmBinary: one entry per build; a build without one is read from disk', async () => {
  const wasmBinary = { scalar: await bytesOf('scalar'), threads: await bytesOf('threads') };
  const threaded = await init({ threads: 2, wasmBinary });
  assert.deepEqual([threaded.features.simd, threaded.features.threads], [true, 2]);
  check(threaded);
  const scalar = await init({ simd: false, wasmBinary });
  assert.equal(scalar.features.simd, false);
  check(scalar);
  check(await init({ wasmBinary: { scalar: wasmBinary.scalar } })); // SIMD picked, fetched as usual
});

test('wasmBinary: wrong values throw an AttentionError naming wasmBinary', async () => {
  await assert.rejects(init({ wasmBinary: 'attention-simd.wasm' }), assertAttentionError('wasmBinary', /ArrayBuffer or Uint8Array/));
  await assert.rejects(init({ wasmBinary: new Float32Array(16) }), assertAttentionError('wasmBinary', /got Float32Array\(16\)/));
  await assert.rejects(init({ wasmBinary: new TextEncoder().encode('<!doctype html><p>Not Found') }),
    assertAttentionError('wasmBinary', /not WebAssembly/));
  await assert.rejects(init({ wasmBinary: { simdd: await bytesOf('simd') } }), assertAttentionError('wasmBinary.simdd', /one of the builds/));
  await assert.rejects(init({ wasmBinary: { scalar: 42 } }), assertAttentionError('wasmBinary.scalar', /got 42/));
  // Another build's bytes do not link with this build's glue.
  await assert.rejects(init({ wasmBinary: await bytesOf('threads') }), assertAttentionError('wasmBinary', /attention-simd\.wasm.*does not link/));
  await assert.rejects(init({ threads: 2, wasmBinary: { threads: await bytesOf('simd') } }),
    assertAttentionError('wasmBinary.threads', /attention-threads\.wasm/));
});

test('wasmBaseUrl: a folder URL (trailing slash optional); a missing file names its URL', async () => {
  check(await init({ wasmBaseUrl: dist }));
  check(await init({ wasmBaseUrl: dist.href.replace(/\/$/, '') }));
  await assert.rejects(init({ wasmBaseUrl: 42 }), assertAttentionError('wasmBaseUrl', /a string or URL/));
  await assert.rejects(init({ wasmBaseUrl: 'no/base/' }), assertAttentionError('wasmBaseUrl', /absolute URL/));
  await assert.rejects(init({ wasmBaseUrl: new URL('./no-such-folder/', dist) }), (error) => {
    assert.ok(!(error instanceof AttentionError));
    assert.match(error.message, /could not load attention-simd\.wasm from file:.*no-such-folder\/attention-simd\.wasm: ENOENT/);
    return true;
  });
});

test('unknown or misspelt init options throw before anything loads', async () => {
  await assert.rejects(init({ wasmBinaries: new Uint8Array(8) }), assertAttentionError('wasmBinaries', /one of the options threads, simd, relaxedSimd, wasmBaseUrl, wasmBinary/));
  await assert.rejects(init({ thread: 2 }), assertAttentionError('thread', /unknown option/));
});
