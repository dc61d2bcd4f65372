// attn.masks: the builders' values and shapes, their argument checks, merge()'s rule, and the
// merged mask giving MultiheadAttention the same result as the two masks it came from.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { assertAttentionError, loadedModule, maxRelativeError, moduleFixture, rng } from './helpers.js';

let attn;
before(async () => {
  attn = await init();
});

// Asserts a boolean mask's type, shape and every value: want(...index) is true where 1.
function assertBoolMask(mask, shape, want) {
  assert.ok(mask.data instanceof Uint8Array, 'a Uint8Array');
  assert.deepEqual(mask.shape, shape);
  assert.equal(mask.data.length, shape.reduce((a, b) => a * b, 1));
  const index = new Array(shape.length).fill(0);
  for (let flat = 0; flat < mask.data.length; flat++) {
    assert.equal(mask.data[flat], want(...index) ? 1 : 0, `[${index}]`);
    for (let a = shape.length - 1; a >= 0 && ++index[a] === shape[a]; a--) index[a] = 0;
  }
}

const show = (v) => (typeof v === 'string' ? `'${v}'` : String(v));

describe('causal', () => {
  for (const [n, m] of [[0, 0], [1, 1], [4, 4], [3, 6], [6, 3], [0, 3], [3, 0], [1, 5]]) {
    test(`causal(${n}, ${m})`, () => {
      assertBoolMask(attn.masks.causal(n, m), [n, m], (i, j) => j > i);
    });
  }
  test('m defaults to n', () => {
    assertBoolMask(attn.masks.causal(5), [5, 5], (i, j) => j > i);
    assertBoolMask(attn.masks.causal(0), [0, 0], () => false);
  });
  test('bad sizes', () => {
    for (const bad of [-1, 1.5, NaN, Infinity, '3', null]) {
      assertAttentionError(() => attn.masks.causal(bad), AttentionError, 'n');
      assertAttentionError(() => attn.masks.causal(3, bad), AttentionError, 'm');
    }
  });
});

describe('keyPadding and padding2d', () => {
  const CASES = [
    [[3, 0, 5, 1], 5],
    [[0], 4],
    [[4, 4], 4],
    [[0, 0], 0],
    [[], 3],
  ];
  for (const [lengths, maxLen] of CASES) {
    test(`keyPadding([${lengths}], ${maxLen})`, () => {
      assertBoolMask(attn.masks.keyPadding(lengths, maxLen), [lengths.length, maxLen], (b, j) => j >= lengths[b]);
    });
    test(`padding2d([${lengths}], ${maxLen})`, () => {
      assertBoolMask(attn.masks.padding2d(lengths, maxLen), [lengths.length, maxLen, maxLen], (b, i, j) => i >= lengths[b] || j >= lengths[b]);
    });
  }

  test('the lengths argument is not modified', () => {
    const lengths = [2, 1];
    attn.masks.keyPadding(lengths, 3);
    attn.masks.padding2d(lengths, 3);
    assert.deepEqual(lengths, [2, 1]);
  });

  for (const build of ['keyPadding', 'padding2d']) {
    test(`${build}: bad lengths and maxLen`, () => {
      for (const bad of [-1, 5, 1.5, NaN, Infinity, '2', null]) {
        const error = assertAttentionError(() => attn.masks[build]([2, bad], 4), AttentionError, /^lengths/);
        assert.match(error.argument, /lengths\[1\]|^lengths$/, `the bad length is named: ${error.message}`);
      }
      assertAttentionError(() => attn.masks[build](5, 4), AttentionError, 'lengths');
      assertAttentionError(() => attn.masks[build](null, 4), AttentionError, 'lengths');
      for (const bad of [-1, 1.5, NaN, '4']) assertAttentionError(() => attn.masks[build]([0], bad), AttentionError, 'maxLen');
    });
  }
});

describe('merge', () => {
  const random = rng(99);
  const N = 2;
  const H = 3;
  const n = 4;
  const m = 5;
  const kpm = { shape: [N, m], data: Uint8Array.from([0, 0, 1, 0, 1, 1, 1, 1, 1, 1]) }; // batch 1 fully padded
  const padded = (b, j) => kpm.data[b * m + j] === 1;
  const boolMask = (shape, p = 0.3) => ({ shape, data: Uint8Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => (random() < p ? 1 : 0)) });
  const floatMask = (shape) => ({
    shape,
    data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => (random() < 0.15 ? -Infinity : Math.fround(random() * 4 - 2))),
  });

  // Asserts merged [N*H, rows, m] equals value(b, h, i, j) exactly.
  function assertMerged(merged, rows, value) {
    assert.ok(merged.data instanceof Float32Array, 'a Float32Array');
    assert.deepEqual(merged.shape, [N * H, rows, m]);
    for (let b = 0; b < N; b++)
      for (let h = 0; h < H; h++)
        for (let i = 0; i < rows; i++)
          for (let j = 0; j < m; j++) {
            const got = merged.data[((b * H + h) * rows + i) * m + j];
            const want = value(b, h, i, j);
            assert.ok(got === want, `[${b * H + h}, ${i}, ${j}] (batch ${b}, head ${h}): got ${got}, want ${want}`);
          }
  }

  test('null attnMask: [N*H, 1, m] with -Infinity exactly at padding and 0 elsewhere', () => {
    assertMerged(attn.masks.merge(null, kpm, H), 1, (b, h, i, j) => (padded(b, j) ? -Infinity : 0));
    assertMerged(attn.masks.merge(undefined, kpm, H), 1, (b, h, i, j) => (padded(b, j) ? -Infinity : 0));
  });

  test('a float keyPaddingMask is added as it is', () => {
    const fkpm = floatMask([N, m]);
    assertMerged(attn.masks.merge(null, fkpm, H), 1, (b, h, i, j) => fkpm.data[b * m + j]);
  });

  test('2-D bool attnMask: [N*H, n, m], OR-ed with the padding', () => {
    const am = boolMask([n, m]);
    assertMerged(attn.masks.merge(am, kpm, H), n, (b, h, i, j) => (am.data[i * m + j] || padded(b, j) ? -Infinity : 0));
  });

  test('2-D float attnMask: its values, with -Infinity added where padded', () => {
    const am = floatMask([n, m]);
    assertMerged(attn.masks.merge(am, kpm, H), n, (b, h, i, j) => (padded(b, j) ? -Infinity : am.data[i * m + j]));
  });

  test('2-D float attnMask with a float keyPaddingMask: the sum', () => {
    const am = floatMask([n, m]);
    const fkpm = floatMask([N, m]);
    assertMerged(attn.masks.merge(am, fkpm, H), n, (b, h, i, j) => Math.fround(am.data[i * m + j] + fkpm.data[b * m + j]));
  });

  test('3-D bool attnMask [N*H, n, m], indexed batch-major as PyTorch', () => {
    const am = boolMask([N * H, n, m]);
    assertMerged(attn.masks.merge(am, kpm, H), n, (b, h, i, j) => (am.data[((b * H + h) * n + i) * m + j] || padded(b, j) ? -Infinity : 0));
  });

  test('3-D float attnMask [N*H, n, m]', () => {
    const am = floatMask([N * H, n, m]);
    assertMerged(attn.masks.merge(am, kpm, H), n, (b, h, i, j) => (padded(b, j) ? -Infinity : am.data[((b * H + h) * n + i) * m + j]));
  });

  test('the inputs are not modified', () => {
    const am = floatMask([n, m]);
    const before = am.data.slice();
    const kpmBefore = kpm.data.slice();
    attn.masks.merge(am, kpm, H);
    assert.deepEqual(am.data, before);
    assert.deepEqual(kpm.data, kpmBefore);
  });

  test('bad arguments', () => {
    assertAttentionError(() => attn.masks.merge(null, null, H), AttentionError, 'keyPaddingMask');
    assertAttentionError(() => attn.masks.merge(null, { shape: [N, m], data: new Int32Array(N * m) }, H), AttentionError, /^keyPaddingMask/, ['Int32Array']);
    assertAttentionError(() => attn.masks.merge(boolMask([n, m + 1]), kpm, H), AttentionError, 'attnMask', [`[${n}, ${m + 1}]`]);
    assertAttentionError(() => attn.masks.merge(boolMask([N, n, m]), kpm, H), AttentionError, 'attnMask', [`[${N}, ${n}, ${m}]`, `${N * H}`]);
    for (const bad of [0, -1, 1.5, NaN, '3']) assertAttentionError(() => attn.masks.merge(null, kpm, bad), AttentionError, 'numHeads');
  });
});

describe('the merged mask in MultiheadAttention', () => {
  // E 8, 2 heads; query [5, 2, 8], key [5, 2, 8]: N 2, n = m = 5.
  const c = moduleFixture('mha', 'no_mask');
  const H = 2;
  const [n, N] = c.query.shape;
  const m = c.key.shape[0];
  const random = rng(4242);
  const kpm = { shape: [N, m], data: Uint8Array.from([0, 0, 1, 0, 1, 0, 1, 1, 1, 1]) }; // batch 1 keeps only key 0
  const floatKpm = { shape: [N, m], data: Float32Array.from([0, -0.5, -Infinity, 1, -Infinity, 0.25, -Infinity, -Infinity, -Infinity, -Infinity]) };
  const bool = (shape) => ({ shape, data: Uint8Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => (random() < 0.3 ? 1 : 0)) });
  const float = (shape) => ({
    shape,
    data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => (random() < 0.2 ? -Infinity : random() * 3 - 1.5)),
  });

  const CASES = {
    'no attnMask, bool padding': [null, kpm],
    '2-D bool attnMask, bool padding': [bool([n, m]), kpm],
    '2-D float attnMask, bool padding': [float([n, m]), kpm],
    '3-D bool attnMask, float padding': [bool([N * H, n, m]), floatKpm],
    '3-D float attnMask, float padding': [float([N * H, n, m]), floatKpm],
  };

  for (const [name, [attnMask, keyPaddingMask]] of Object.entries(CASES)) {
    test(name, () => {
      // Without an attnMask the merged mask is [N*H, 1, m], which MultiheadAttention takes as it is.
      const merged = attn.masks.merge(attnMask, keyPaddingMask, H);
      const module = loadedModule(attn, 'MultiheadAttention', c);
      try {
        for (const needWeights of [true, false]) {
          for (const averageAttnWeights of [true, false]) {
            const opts = { needWeights, averageAttnWeights };
            const separate = module.forward(c.query, c.key, c.value, { ...opts, attnMask, keyPaddingMask });
            const single = module.forward(c.query, c.key, c.value, { ...opts, attnMask: merged });
            assert.deepEqual(single.output.shape, separate.output.shape);
            const error = maxRelativeError(single.output.data, separate.output.data);
            assert.ok(error <= 1e-6, `output differs by ${error}`);
            assert.ok(!single.output.data.some(Number.isNaN), 'no NaN');
            if (needWeights) {
              assert.deepEqual(single.weights.shape, separate.weights.shape);
              const werror = maxRelativeError(single.weights.data, separate.weights.data);
              assert.ok(werror <= 1e-6, `weights differ by ${werror}`);
            }
          }
        }
        // The masks matter: unmasked attention differs.
        const plain = module.forward(c.query, c.key, c.value);
        const masked = module.forward(c.query, c.key, c.value, { attnMask: merged });
        assert.ok(maxRelativeError(plain.output.data, masked.output.data) > 1e-3, 'the mask has an effect');
      } finally {
        module.dispose();
      }
    });
  }
});
