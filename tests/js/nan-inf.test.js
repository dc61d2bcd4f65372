// NaN and Infinity in the data are not errors: they propagate as in PyTorch. A query that may
// attend to no key still gets zeros, whatever its keys hold.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';

import { init } from 'attention-wasm';

let attn;
before(async () => {
  attn = await init();
});

const tensor = (shape, f) => ({ shape, data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => f(i)) });

test('NaN in one query row makes that row NaN and leaves the others finite', () => {
  const q = tensor([3, 4], (i) => (i === 5 ? NaN : Math.sin(i)));
  const k = tensor([5, 4], (i) => Math.cos(i));
  const v = tensor([5, 2], (i) => i / 10);
  for (const needWeights of [true, false]) {
    const { output, weights } = attn.scaledDotProductAttention(q, k, v, { needWeights });
    assert.ok(Number.isNaN(output.data[2]) && Number.isNaN(output.data[3]), 'row 1 is NaN');
    for (const i of [0, 1, 4, 5]) assert.ok(Number.isFinite(output.data[i]), `output ${i} is finite`);
    if (weights) assert.ok(weights.data.slice(5, 10).every(Number.isNaN));
  }
});

test('Infinity in a value propagates: weights times Infinity', () => {
  const q = tensor([2, 3], (i) => Math.sin(i));
  const k = tensor([4, 3], (i) => Math.cos(i));
  const v = tensor([4, 1], (i) => (i === 2 ? Infinity : 1));
  const { output } = attn.scaledDotProductAttention(q, k, v);
  assert.deepEqual(Array.from(output.data), [Infinity, Infinity]);
});

test('a fully masked query outputs zeros even when its keys hold NaN; a query that sees the NaN is NaN', () => {
  const q = tensor([2, 3], (i) => Math.sin(i));
  const k = tensor([4, 3], (i) => (i < 3 ? NaN : Math.cos(i))); // key 0 is NaN
  const v = tensor([4, 2], (i) => (i < 2 ? NaN : 1)); // value 0 is NaN
  // SDPA polarity: 1 = may attend. Query 0 sees nothing; query 1 sees every key.
  const attnMask = { shape: [2, 4], data: Uint8Array.from([0, 0, 0, 0, 1, 1, 1, 1]) };
  for (const needWeights of [true, false]) {
    const { output, weights } = attn.scaledDotProductAttention(q, k, v, { attnMask, needWeights });
    assert.deepEqual(Array.from(output.data.slice(0, 2)), [0, 0]);
    assert.ok(output.data.slice(2).every(Number.isNaN), 'query 1 attends to the NaN key');
    if (weights) assert.deepEqual(Array.from(weights.data.slice(0, 4)), [0, 0, 0, 0]);
  }
});

test('MultiheadAttention: NaN in one batch element leaves the other finite', () => {
  const E = 8;
  const mha = new attn.MultiheadAttention(E, 2).loadStateDict({
    in_proj_weight: tensor([3 * E, E], (i) => 0.1 * Math.sin(i)),
    in_proj_bias: tensor([3 * E], () => 0),
    'out_proj.weight': tensor([E, E], (i) => 0.1 * Math.cos(i)),
    'out_proj.bias': tensor([E], () => 0.5),
  });
  // (L, N, E) = (3, 2, E): token (l = 1, n = 1) holds a NaN.
  const x = tensor([3, 2, E], (i) => (i === (1 * 2 + 1) * E ? NaN : Math.sin(0.3 * i)));
  for (const needWeights of [true, false]) {
    const { output } = mha.forward(x, x, x, { needWeights });
    for (let l = 0; l < 3; l++) {
      const row = (n) => output.data.slice((l * 2 + n) * E, (l * 2 + n + 1) * E);
      assert.ok(row(0).every(Number.isFinite), `token ${l} of batch 0 is finite`);
      assert.ok(row(1).every(Number.isNaN), `token ${l} of batch 1 is NaN`);
    }
  }
  mha.dispose();
});
