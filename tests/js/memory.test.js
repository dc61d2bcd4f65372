// Memory: without weights no n x m buffer is allocated (streaming softmax); with weights the
// materialised path works at a size that fits.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { init } from 'attention-wasm';

import { TOLERANCE, maxRelativeError, randomTensor, referenceRow, rng } from './helpers.js';

const MiB = 2 ** 20;

function assertRowsMatchReference(result, query, key, value, rows) {
  const dv = value.shape[1];
  const m = key.shape[0];
  for (const i of rows) {
    const want = referenceRow(query, key, value, i);
    const output = result.output.data.subarray(i * dv, (i + 1) * dv);
    assert.ok(maxRelativeError(output, want.output) <= TOLERANCE, `output row ${i}`);
    if (result.weights) {
      const weights = result.weights.data.subarray(i * m, (i + 1) * m);
      assert.ok(maxRelativeError(weights, want.weights) <= TOLERANCE, `weights row ${i}`);
    }
  }
}

test('streaming path: n = m = 8192, d = 64 grows wasm memory by less than 16 MiB', async () => {
  const attn = await init();
  const random = rng(2024);
  const n = 8192;
  const query = randomTensor([n, 64], random);
  const key = randomTensor([n, 64], random);
  const value = randomTensor([n, 64], random);

  const before = attn.stats().wasmHeapBytes;
  const result = attn.scaledDotProductAttention(query, key, value, { needWeights: false });
  const growth = attn.stats().wasmHeapBytes - before;
  // Inputs and output take 8 MiB; materialised weights would take 256 MiB.
  assert.ok(growth < 16 * MiB, `wasm memory grew by ${growth / MiB} MiB`);

  assert.equal(result.weights, null);
  assert.deepEqual(result.output.shape, [n, 64]);
  assert.ok(!result.output.data.some(Number.isNaN), 'no NaN in the output');
  assertRowsMatchReference(result, query, key, value, [0, 1, 31, 32, 4095, 8191]);
});

test('materialised path: n = m = 512, d = 64 with weights', async () => {
  const attn = await init();
  const random = rng(77);
  const n = 512;
  const query = randomTensor([n, 64], random);
  const key = randomTensor([n, 64], random);
  const value = randomTensor([n, 48], random);

  const result = attn.scaledDotProductAttention(query, key, value, { needWeights: true });
  assert.deepEqual(result.weights.shape, [n, n]);
  assert.deepEqual(result.output.shape, [n, 48]);
  for (let i = 0; i < n; i++) {
    const sum = result.weights.data.subarray(i * n, (i + 1) * n).reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(sum - 1) < 1e-4, `weights row ${i} sums to ${sum}`);
  }
  assertRowsMatchReference(result, query, key, value, [0, 33, 200, 511]);

  const streaming = attn.scaledDotProductAttention(query, key, value, { needWeights: false });
  assert.ok(maxRelativeError(streaming.output.data, result.output.data) <= TOLERANCE);
});
