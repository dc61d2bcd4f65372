// What a KVCache refuses rather than answer wrongly (issue #35): a rollback of a ring that has
// dropped positions below the window − 1 the next position sees, and an f16 append of a finite
// value binary16 would hold as ±Infinity. Each refusal names what is wrong and changes nothing;
// what is accepted equals a cache given the same positions afresh.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { BUILDS, assertAttentionError, bitIdentical } from './helpers.js';

const W = 4;
const HEADS = 2, HEAD_DIM = 3, VALUE_DIM = 2;

// Positions [first, first + t) for every head, their values a function of (position, head) alone;
// `variant` gives other tokens at the same positions (what a rollback decodes instead).
function positions(first, t, variant = 0) {
  const tensor = (width, salt) => {
    const data = new Float32Array(HEADS * t * width);
    for (let h = 0; h < HEADS; h++)
      for (let i = 0; i < t; i++)
        for (let e = 0; e < width; e++)
          data[(h * t + i) * width + e] = Math.sin(1.7 * (first + i) + 0.9 * h + 2.3 * e + 0.37 * variant + salt);
    return { data, shape: [1, HEADS, t, width] };
  };
  return [tensor(HEAD_DIM, 0), tensor(VALUE_DIM, 1)];
}

// t replacement tokens appended, then their attend (grouped heads 4 over 2) with its weights.
function step(cache, t) {
  cache.append(...positions(cache.position, t, 7));
  const query = { data: Float32Array.from({ length: 4 * t * HEAD_DIM }, (_, i) => Math.cos(0.3 * i)), shape: [1, 4, t, HEAD_DIM] };
  const { output, weights } = cache.attend(query, { needWeights: true });
  return { output, weights, length: cache.length };
}

function assertSameStep(got, want, what) {
  assert.equal(got.length, want.length, `${what}: positions held`);
  for (const name of ['output', 'weights']) {
    assert.deepEqual(got[name].shape, want[name].shape, `${what}: ${name} shape`);
    const worst = got[name].data.reduce((m, x, i) => Math.max(m, Math.abs(x - want[name].data[i])), 0);
    assert.ok(worst <= 1e-6, `${what}: ${name} differs by ${worst}`);
  }
}

for (const build of BUILDS) {
  describe(`${build.name} build`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    test('a truncate of a wrapped ring equals a fresh cache given the same positions, or is refused naming the window', () => {
      let exact = 0, refused = 0;
      for (const dtype of ['f32', 'f16'])
        for (const prefill of [1, 2, W, W + 2])
          // Single steps after the prefill bring every offset of the ring's start round.
          for (let total = prefill; total <= prefill + 2 * W + 1; total++) {
            const replay = () => {
              const cache = new attn.KVCache({ heads: HEADS, headDim: HEAD_DIM, valueDim: VALUE_DIM, maxLength: 2, window: W, dtype });
              cache.append(...positions(0, prefill));
              for (let p = prefill; p < total; p++) cache.append(...positions(p, 1));
              return cache;
            };
            const probe = replay();
            const held = probe.length, dropped = total - held;
            probe.dispose();
            for (let length = 0; length <= held; length++)
              for (const t of [1, 2]) {
                const what = `${dtype}, prefill ${prefill}, ${total} appended, ${held} held, truncate(${length}), then ${t}`;
                const cache = replay();
                if (dropped > 0 && length < W - 1) {
                  const keys = cache.keys();
                  assertAttentionError(() => cache.truncate(length), AttentionError, 'length', [
                    `length: expected an integer in [3, ${held}] (window 4: the ring no longer holds the positions before ${dropped}, ` +
                      `and the next position must still see the 3 before it; to roll back further, reset() and append again), got ${length}`,
                  ]);
                  assert.equal(cache.length, held, what);
                  assert.equal(cache.position, total, what);
                  assert.ok(bitIdentical(cache.keys().data, keys.data), `${what}: keys unchanged`);
                  const untouched = replay();
                  assertSameStep(step(cache, t), step(untouched, t), `${what} (refused)`);
                  untouched.dispose();
                  refused++;
                } else {
                  cache.truncate(length);
                  assert.equal(cache.position, dropped + length, what);
                  const fresh = new attn.KVCache({ heads: HEADS, headDim: HEAD_DIM, valueDim: VALUE_DIM, maxLength: 2, window: W, dtype });
                  for (let p = 0; p < cache.position; p++) fresh.append(...positions(p, 1));
                  assertSameStep(step(cache, t), step(fresh, t), what);
                  fresh.dispose();
                  exact++;
                }
                cache.dispose();
              }
          }
      assert.ok(exact >= 400 && refused >= 300, `${exact} exact, ${refused} refused`);
    });

    test('a speculative rollback: a draft appended in one call can be dropped whole', () => {
      // Decode 12 tokens one by one in a window-4 ring, append a draft of 3, keep none of it.
      const cache = new attn.KVCache({ heads: HEADS, headDim: HEAD_DIM, valueDim: VALUE_DIM, maxLength: 4, window: W });
      for (let p = 0; p < 12; p++) cache.append(...positions(p, 1));
      cache.append(...positions(12, 3, 5));
      assert.equal(cache.length, W - 1 + 3);
      cache.truncate(W - 1);
      const fresh = new attn.KVCache({ heads: HEADS, headDim: HEAD_DIM, valueDim: VALUE_DIM, maxLength: 4, window: W });
      for (let p = 0; p < 12; p++) fresh.append(...positions(p, 1));
      assertSameStep(step(cache, 1), step(fresh, 1), 'after the rollback');
      // Dropped one by one, the same draft leaves the ring only W positions: rolling all 3 back is refused.
      const stepwise = new attn.KVCache({ heads: HEADS, headDim: HEAD_DIM, valueDim: VALUE_DIM, maxLength: 4, window: W });
      for (let p = 0; p < 15; p++) stepwise.append(...positions(p, 1));
      assertAttentionError(() => stepwise.truncate(W - 3), AttentionError, 'length', ['window 4', 'got 1']);
      for (const c of [cache, fresh, stepwise]) c.dispose();
    });

    test("an f16 append of a finite value past binary16's range throws naming where it is, and keeps the cache", () => {
      const cache = new attn.KVCache({ batch: 2, heads: 2, headDim: 3, valueDim: 2, maxLength: 8, dtype: 'f16' });
      const first = { data: Float32Array.from({ length: 2 * 2 * 3 * 3 }, (_, i) => Math.sin(i)), shape: [2, 2, 3, 3] };
      cache.append(first, { data: Float32Array.from({ length: 2 * 2 * 3 * 2 }, (_, i) => Math.cos(i)), shape: [2, 2, 3, 2] });
      const query = { data: Float32Array.from({ length: 2 * 2 * 1 * 3 }, (_, i) => 0.1 * i), shape: [2, 2, 1, 3] };
      const before = { keys: cache.keys(), values: cache.values(), output: cache.attend(query).output };
      const key = () => ({ data: new Float32Array(2 * 2 * 2 * 3).fill(0.5), shape: [2, 2, 2, 3] });
      const value = () => ({ data: new Float32Array(2 * 2 * 2 * 2).fill(-0.25), shape: [2, 2, 2, 2] });
      const expected = "values within binary16's range, |x| < 65520 (this cache of dtype 'f16' would store the value as ±Infinity; a cache of dtype 'f32' holds it)";
      // [tensor, index, value, got]: key index ((b·2 + h)·2 + i)·3 + d, value ((b·2 + h)·2 + i)·2 + d.
      for (const [name, index, x, got] of [
        ['key', ((0 * 2 + 1) * 2 + 0) * 3 + 2, 70000, '70000 at batch 0, head 1, position 3, dim 2'],
        ['key', ((1 * 2 + 0) * 2 + 1) * 3 + 0, -65520, '-65520 at batch 1, head 0, position 4, dim 0'],
        ['value', ((1 * 2 + 1) * 2 + 1) * 2 + 1, 3.4e38, '3.4e+38 at batch 1, head 1, position 4, dim 1'],
      ]) {
        const k = key(), v = value();
        (name === 'key' ? k : v).data[index] = x;
        const error = assertAttentionError(() => cache.append(k, v), AttentionError, name);
        assert.equal(error.expected, expected);
        assert.equal(error.got, got);
        assert.equal(cache.length, 3);
        assert.equal(cache.position, 3);
        assert.ok(bitIdentical(cache.keys().data, before.keys.data), 'keys unchanged');
        assert.ok(bitIdentical(cache.values().data, before.values.data), 'values unchanged');
        assert.ok(bitIdentical(cache.attend(query).output.data, before.output.data), 'attends unchanged');
      }
      // 65519 rounds to 65504 and is held; Infinity and NaN given are held as such.
      const k = key(), v = value();
      k.data[0] = 65519;
      k.data[1] = Infinity;
      v.data[0] = NaN;
      cache.append(k, v);
      const held = cache.keys().data;
      assert.equal(held[3 * 3], 65504);
      assert.equal(held[3 * 3 + 1], Infinity);
      assert.ok(Number.isNaN(cache.values().data[3 * 2]));
      cache.dispose();
    });

    test("GroupedQueryAttention with an f16 cache refuses a projection past binary16's range; the cache keeps its positions", () => {
      const block = new attn.GroupedQueryAttention(4, 2, 1, { headDim: 2 });
      const eye = (rows, cols, scale = 1) => ({ data: Float32Array.from({ length: rows * cols }, (_, i) => (i % (cols + 1) === 0 ? scale : 0)), shape: [rows, cols] });
      block.loadStateDict({ 'q_proj.weight': eye(4, 4), 'k_proj.weight': eye(2, 4), 'v_proj.weight': eye(2, 4, 1000), 'o_proj.weight': eye(4, 4) });
      const cache = block.createCache(4, { dtype: 'f16' });
      block.forward({ data: Float32Array.of(0.5, 1, 1.5, 2), shape: [1, 1, 4] }, { cache });
      // v = 1000·x: 80 × 1000 is past 65504.
      const error = assertAttentionError(() => block.forward({ data: Float32Array.of(1, 80, 0, 0), shape: [1, 1, 4] }, { cache }), AttentionError, 'value');
      assert.equal(error.got, '80000 at batch 0, head 0, position 1, dim 1');
      assert.equal(cache.length, 1);
      assert.equal(cache.position, 1);
      block.forward({ data: Float32Array.of(1, 60, 0, 0), shape: [1, 1, 4] }, { cache });
      assert.equal(cache.position, 2);
      cache.dispose();
      block.dispose();
    });
  });
}
