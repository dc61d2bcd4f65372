// Memory: without weights no n x m buffer is allocated (streaming softmax); with weights the
// materialised path works at a size that fits.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { init } from 'attention-wasm';

import { SPILL_ABOVE_BYTES } from '../../bindings/modules.js';
import { TOLERANCE, bitIdentical, maxRelativeError, randomTensor, referenceRow, rng } from './helpers.js';

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

/** A MultiheadAttention(E, H) with random weights from `random`. */
function randomMultiheadAttention(attn, E, H, random) {
  return new attn.MultiheadAttention(E, H).loadStateDict({
    in_proj_weight: randomTensor([3 * E, E], random),
    in_proj_bias: randomTensor([3 * E], random),
    'out_proj.weight': randomTensor([E, E], random),
    'out_proj.bias': randomTensor([E], random),
  });
}

test('MultiheadAttention averages weights over heads without holding every head', async () => {
  const attn = await init();
  const random = rng(11);
  const E = 64, H = 8;
  const mha = randomMultiheadAttention(attn, E, H, random);

  // The mean of the per-head weights (whose values the fixtures check), over several query and key tiles.
  const L = 300;
  const x = randomTensor([L, 1, E], random);
  const perHead = mha.forward(x, x, x, { isCausal: true, averageAttnWeights: false }).weights.data;
  const averaged = mha.forward(x, x, x, { isCausal: true }).weights;
  assert.deepEqual(averaged.shape, [1, L, L]);
  const mean = new Float32Array(L * L);
  for (let h = 0; h < H; h++) for (let e = 0; e < mean.length; e++) mean[e] += perHead[h * L * L + e];
  for (let e = 0; e < mean.length; e++) mean[e] /= H;
  assert.ok(bitIdentical(averaged.data, mean), 'averaged weights are the per-head ones summed in head order over H');

  // At L = 2048 every head's weights would take 128 MiB; the average alone takes 16.
  const long = randomTensor([2048, 1, E], random);
  const before = attn.stats().wasmHeapBytes;
  const result = mha.forward(long, long, long, { isCausal: true });
  const growth = attn.stats().wasmHeapBytes - before;
  assert.ok(growth < 40 * MiB, `wasm memory grew by ${growth / MiB} MiB`);
  const row = result.weights.data.subarray(2047 * 2048, 2048 * 2048);
  assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-4, 'the last query row sums to 1');
  mha.dispose();
});

test('MultiheadAttention without weights takes long inputs one head at a time: the same bits in less memory', async () => {
  const attn = await init();
  const random = rng(5);
  const E = 256, H = 4, N = 64, L = 256;
  assert.equal(2 * 4 * E * N * L, SPILL_ABOVE_BYTES, 'packed keys and values reach the threshold');
  const mha = randomMultiheadAttention(attn, E, H, random);
  const x = randomTensor([L, N, E], random);

  const before = attn.stats().wasmHeapBytes;
  const whole = mha.forward(x, x, x, { isCausal: true, needWeights: false });
  const growth = attn.stats().wasmHeapBytes - before;
  // All heads at once would hold the input's copy (16 MiB) and every head's keys and values (32).
  assert.ok(growth < 32 * MiB, `wasm memory grew by ${growth / MiB} MiB`);

  // Against batches of 16, whose keys and values (8 MiB) stay under the threshold: all heads at once.
  const batch = 16;
  for (let n0 = 0; n0 < N; n0 += batch) {
    const part = new Float32Array(L * batch * E);
    for (let l = 0; l < L; l++) part.set(x.data.subarray((l * N + n0) * E, (l * N + n0 + batch) * E), l * batch * E);
    const tensor = { data: part, shape: [L, batch, E] };
    const { output } = mha.forward(tensor, tensor, tensor, { isCausal: true, needWeights: false });
    for (let l = 0; l < L; l++) {
      const want = whole.output.data.subarray((l * N + n0) * E, (l * N + n0 + batch) * E);
      assert.ok(bitIdentical(output.data.subarray(l * batch * E, (l + 1) * batch * E), want), `position ${l}, batch ${n0}`);
    }
  }
  mha.dispose();
});

test('a padded batch decoding through a windowed cache holds its memory step after step, and frees it on dispose', async () => {
  const attn = await init();
  const random = rng(6);
  const live = attn.stats().liveObjects;
  const block = attn.GroupedQueryAttention.fromConfig({
    model_type: 'gemma3_text', hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16,
    sliding_window: 16, rope_scaling: { rope_type: 'linear', factor: 8 },
  }, { layer: 0 });
  const sd = {};
  for (const [name, shape] of [['q_proj.weight', [64, 32]], ['k_proj.weight', [32, 32]], ['v_proj.weight', [32, 32]], ['o_proj.weight', [32, 64]], ['q_norm.weight', [16]], ['k_norm.weight', [16]]])
    sd[name] = randomTensor(shape, random);
  block.loadStateDict(sd);
  const cache = block.createCache(32, { batch: 3 });
  const attentionMask = { data: Uint8Array.from({ length: 3 * 12 }, (_, i) => (i % 12 >= 4 * Math.floor(i / 12) ? 1 : 0)), shape: [3, 12] };
  block.forward(randomTensor([3, 12, 32], random), { cache, attentionMask });
  const step = randomTensor([3, 1, 32], random);
  for (let i = 0; i < 20; i++) block.forward(step, { cache });
  const before = attn.stats().wasmHeapBytes;
  for (let i = 0; i < 300; i++) block.forward(step, { cache });
  // project() at the cache's positions, as a viewer looking inside the block calls it step after step.
  for (let i = 0; i < 100; i++) block.project(step, { cache });
  assert.equal(attn.stats().wasmHeapBytes, before, 'the ring and the held mask stay their size, and project() frees what it used');
  assert.equal(cache.length, 16, 'the latest window of positions');
  cache.dispose();
  block.dispose();
  assert.equal(attn.stats().liveObjects, live);
  attn.dispose();
});

test('GroupedQueryAttention keeps one copy of its projections: eight 16 MiB blocks grow the heap by 1×, not 2×', async () => {
  const attn = await init();
  const h = 1024, weight = { data: new Float32Array(h * h).fill(0.01), shape: [h, h] };
  const sd = { 'q_proj.weight': weight, 'k_proj.weight': weight, 'v_proj.weight': weight, 'o_proj.weight': weight };
  const before = attn.stats().wasmHeapBytes;
  for (let i = 0; i < 8; i++) new attn.GroupedQueryAttention(h, 8, 8).loadStateDict(sd);
  const growth = attn.stats().wasmHeapBytes - before;
  // Packed weights 8 × 16 MiB, plus one load's transient copies; a kept loaded copy would add 128.
  assert.ok(growth < 200 * MiB, `wasm memory grew by ${growth / MiB} MiB`);
  attn.dispose();
});
