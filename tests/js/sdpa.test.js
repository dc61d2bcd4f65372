// scaledDotProductAttention against the PyTorch fixtures on every build, plus the behaviour the
// fixtures cannot show: JS-owned results, broadcast masks, dropout and independent instances.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import {
  TOLERANCE,
  bitIdentical,
  fixture,
  fixtureOptions,
  loadFixtures,
  maxRelativeError,
  randomTensor,
  rng,
} from './helpers.js';

const BUILDS = [
  { name: 'SIMD', opts: undefined, simd: true, threads: 1 },
  { name: 'scalar', opts: { simd: false }, simd: false, threads: 1 },
  { name: 'threaded', opts: { threads: 2 }, simd: true, threads: 2 },
];

function assertClose(got, want, what) {
  assert.deepEqual(got.shape, want.shape, `${what}: shape`);
  const error = maxRelativeError(got.data, want.data);
  assert.ok(error <= TOLERANCE, `${what}: max relative error ${error} > ${TOLERANCE}`);
}

// weights [.., n, m] @ value [.., m, dv] in float64, one leading block at a time.
function applyWeights(weights, value) {
  const [m, dv] = value.shape.slice(-2);
  const n = weights.shape.at(-2);
  const blocks = weights.data.length / (n * m);
  const out = new Float64Array(blocks * n * dv);
  for (let b = 0; b < blocks; b++)
    for (let i = 0; i < n; i++)
      for (let j = 0; j < m; j++) {
        const w = weights.data[(b * n + i) * m + j];
        for (let c = 0; c < dv; c++) out[(b * n + i) * dv + c] += w * value.data[(b * m + j) * dv + c];
      }
  return { shape: [...weights.shape.slice(0, -1), dv], data: out };
}

// A call whose weights [n, n] are larger than the instance's whole heap.
function growHeap(attn) {
  const n = Math.ceil(Math.sqrt(attn.stats().wasmHeapBytes / 4)) + 64;
  const x = randomTensor([n, 2], rng(n));
  attn.scaledDotProductAttention(x, x, x, { needWeights: true });
}

for (const build of BUILDS) {
  describe(`${build.name} build`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    test('reports its features', () => {
      assert.equal(attn.features.simd, build.simd);
      assert.equal(attn.features.threads, build.threads);
      assert.equal(typeof attn.features.version, 'string');
    });

    describe('fixtures', () => {
      for (const c of loadFixtures()) {
        test(`${c.name} (needWeights: true)`, () => {
          const result = attn.scaledDotProductAttention(c.query, c.key, c.value, fixtureOptions(c, { needWeights: true }));
          assertClose(result.output, c.output, 'output');
          assertClose(result.weights, c.weights, 'weights');
        });
        test(`${c.name} (needWeights: false)`, () => {
          const result = attn.scaledDotProductAttention(c.query, c.key, c.value, fixtureOptions(c, { needWeights: false }));
          assertClose(result.output, c.output, 'output');
          assert.equal(result.weights, null);
        });
      }
      test('needWeights defaults to false', () => {
        const c = fixture('batch_heads_no_mask');
        const result = attn.scaledDotProductAttention(c.query, c.key, c.value);
        assertClose(result.output, c.output, 'output');
        assert.equal(result.weights, null);
      });
    });

    test('results are JS-owned copies that later calls and memory growth leave alone', () => {
      const c = fixture('custom_scale');
      const first = attn.scaledDotProductAttention(c.query, c.key, c.value, fixtureOptions(c, { needWeights: true }));
      for (const tensor of [first.output, first.weights]) {
        assert.ok(tensor.data instanceof Float32Array);
        assert.ok(tensor.data.buffer instanceof ArrayBuffer, 'not a SharedArrayBuffer (wasm memory)');
        assert.equal(tensor.data.buffer.byteLength, tensor.data.byteLength, 'the buffer holds exactly the result');
      }
      const output = first.output.data.slice();
      const weights = first.weights.data.slice();

      // A different call, then one whose weights alone exceed the whole heap, so it must grow.
      const other = fixture('causal_rect_n_gt_m');
      attn.scaledDotProductAttention(other.query, other.key, other.value, fixtureOptions(other, { needWeights: true }));
      const heapBefore = attn.stats().wasmHeapBytes;
      growHeap(attn);
      assert.ok(attn.stats().wasmHeapBytes > heapBefore, 'the large call grew wasm memory');

      assert.ok(bitIdentical(first.output.data, output), 'output unchanged');
      assert.ok(bitIdentical(first.weights.data, weights), 'weights unchanged');
      assertClose(first.output, c.output, 'output after growth');
    });

    describe('broadcast masks of lower rank than the scores', () => {
      // Scores [2, 3, n = 4, m = 6]; every mask below is compared with its full-shape expansion.
      const random = rng(11);
      const query = randomTensor([2, 3, 4, 8], random);
      const key = randomTensor([2, 3, 6, 8], random);
      const value = randomTensor([2, 3, 6, 5], random);
      const full = [2, 3, 4, 6];

      // Expands `mask` (right-aligned, size-1 dims stretched) to `shape`.
      function expand(mask, shape) {
        const rank = shape.length;
        const own = [...Array(rank - mask.shape.length).fill(1), ...mask.shape];
        const data = new mask.data.constructor(shape.reduce((a, b) => a * b, 1));
        const index = new Array(rank).fill(0);
        for (let flat = 0; flat < data.length; flat++) {
          let source = 0;
          for (let a = 0; a < rank; a++) source = source * own[a] + (own[a] === 1 ? 0 : index[a]);
          data[flat] = mask.data[source];
          for (let a = rank - 1; a >= 0 && ++index[a] === shape[a]; a--) index[a] = 0;
        }
        return { shape: [...shape], data };
      }

      const masks = {
        'bool [m]': { shape: [6], data: Uint8Array.from([1, 0, 1, 1, 0, 1]) },
        'bool [n, 1]': { shape: [4, 1], data: Uint8Array.from([1, 0, 1, 1]) },
        'bool [3, 1, m]': { shape: [3, 1, 6], data: Uint8Array.from({ length: 18 }, (_, i) => (i % 4 === 1 ? 0 : 1)) },
        'float [n, m]': { shape: [4, 6], data: Float32Array.from({ length: 24 }, (_, i) => (i % 5 === 2 ? -Infinity : Math.sin(i))) },
        'float [2, 1, 1, m]': { shape: [2, 1, 1, 6], data: Float32Array.from({ length: 12 }, (_, i) => i * 0.25 - 1) },
      };
      for (const [name, mask] of Object.entries(masks)) {
        test(name, () => {
          const want = attn.scaledDotProductAttention(query, key, value, { attnMask: expand(mask, full), needWeights: true });
          const unmasked = attn.scaledDotProductAttention(query, key, value, { needWeights: true });
          for (const needWeights of [true, false]) {
            const got = attn.scaledDotProductAttention(query, key, value, { attnMask: mask, needWeights });
            assert.deepEqual(got.output.shape, [2, 3, 4, 5]);
            assertClose(got.output, want.output, 'output');
            if (needWeights) assert.ok(bitIdentical(got.weights.data, want.weights.data), 'weights equal the expanded mask\'s');
          }
          assert.ok(maxRelativeError(want.weights.data, unmasked.weights.data) > 1e-3, 'the mask has an effect');
        });
      }
    });

    describe('dropout', () => {
      // weights [2, 40, 50]: 4,000 draws.
      const random = rng(3);
      const query = randomTensor([2, 40, 16], random);
      const key = randomTensor([2, 50, 16], random);
      const value = randomTensor([2, 50, 8], random);
      const p = 0.3;
      const sdpa = (opts) => attn.scaledDotProductAttention(query, key, value, opts);

      test('the same seed gives bit-identical results', () => {
        const a = sdpa({ dropoutP: p, seed: 42, needWeights: true });
        const b = sdpa({ dropoutP: p, seed: 42, needWeights: true });
        assert.ok(bitIdentical(a.weights.data, b.weights.data));
        assert.ok(bitIdentical(a.output.data, b.output.data));
        const c = sdpa({ dropoutP: p, seed: 42 });
        const d = sdpa({ dropoutP: p, seed: 42 });
        assert.ok(bitIdentical(c.output.data, d.output.data));
      });

      test('a different seed drops different weights', () => {
        const a = sdpa({ dropoutP: p, seed: 42, needWeights: true });
        const b = sdpa({ dropoutP: p, seed: 43, needWeights: true });
        const differing = a.weights.data.filter((w, i) => (w === 0) !== (b.weights.data[i] === 0)).length;
        assert.ok(differing > 100, `only ${differing} of 4000 positions differ`);
      });

      test('drops about p of the weights and scales survivors by 1 / (1 - p)', () => {
        const plain = sdpa({ needWeights: true }).weights.data;
        const dropped = sdpa({ dropoutP: p, seed: 1234, needWeights: true });
        let zeros = 0;
        for (let i = 0; i < plain.length; i++) {
          assert.ok(plain[i] > 0, 'no weight is zero without dropout');
          const w = dropped.weights.data[i];
          if (w === 0) zeros++;
          else assert.ok(Math.abs(w - plain[i] / (1 - p)) <= 1e-6, `weight ${i}: ${w} vs ${plain[i] / (1 - p)}`);
        }
        const fraction = zeros / plain.length;
        assert.ok(Math.abs(fraction - p) < 0.03, `dropped fraction ${fraction}`);
        // The output is the dropped-out weights applied to the values.
        assertClose(dropped.output, applyWeights(dropped.weights, value), 'output');
      });

      test('the weights path and the streaming path give the same output for a seed', () => {
        const withWeights = sdpa({ dropoutP: p, seed: 99, needWeights: true });
        const streaming = sdpa({ dropoutP: p, seed: 99, needWeights: false });
        assertClose(streaming.output, withWeights.output, 'output');
        const undropped = sdpa({});
        assert.ok(maxRelativeError(streaming.output.data, undropped.output.data) > 1e-3, 'dropout had an effect');
      });

      test('without a seed, successive calls draw differently', () => {
        const a = sdpa({ dropoutP: p, needWeights: true });
        const b = sdpa({ dropoutP: p, needWeights: true });
        assert.ok(!bitIdentical(a.weights.data, b.weights.data));
        const c = sdpa({ dropoutP: p });
        const d = sdpa({ dropoutP: p });
        assert.ok(!bitIdentical(c.output.data, d.output.data));
      });

      test('dropoutP 0 is no dropout', () => {
        const plain = sdpa({ needWeights: true });
        const zero = sdpa({ dropoutP: 0, seed: 5, needWeights: true });
        assert.ok(bitIdentical(plain.weights.data, zero.weights.data));
      });
    });
  });
}

describe('several instances', () => {
  test('coexist independently', async () => {
    const [a, b] = await Promise.all([init(), init({ simd: false })]);
    const c = fixture('causal_square');
    const opts = fixtureOptions(c, { needWeights: true });
    const before = a.scaledDotProductAttention(c.query, c.key, c.value, opts);
    assertClose(before.output, c.output, 'output');

    // Errors on b, early (JS) and late (core), and an out-of-memory request.
    const bad = { shape: [3, 4], data: new Uint8Array(12) };
    assert.throws(() => b.scaledDotProductAttention(c.query, c.key, c.value, { attnMask: bad }), AttentionError);
    assert.throws(() => b.scaledDotProductAttention(c.query, null, c.value), AttentionError);
    const long = { shape: [100000, 1], data: new Float32Array(100000) };
    assert.throws(() => b.scaledDotProductAttention(long, long, long, { needWeights: true }), AttentionError);

    const after = a.scaledDotProductAttention(c.query, c.key, c.value, opts);
    assert.ok(bitIdentical(after.output.data, before.output.data));
    assert.ok(bitIdentical(after.weights.data, before.weights.data));

    // Growing b's memory leaves a's alone, and b still computes correctly.
    const heapA = a.stats().wasmHeapBytes;
    const heapB = b.stats().wasmHeapBytes;
    growHeap(b);
    assert.ok(b.stats().wasmHeapBytes > heapB);
    assert.equal(a.stats().wasmHeapBytes, heapA);
    assertClose(b.scaledDotProductAttention(c.query, c.key, c.value, opts).weights, c.weights, 'weights on b');
  });
});
