// KVCache of dtype 'q8' (llama.cpp's q8_0) on every build: an attend equals
// scaledDotProductAttention over the keys and values it holds with the query rounded through q8 as
// the API says (blocks of 32 along headDim, the last shorter; d = max|x| / 127, q = round(x / d)),
// whatever the options and the path (a decode step's integer scores, the packed tiles); its
// distance from an f32 cache; GroupedQueryAttention and generate() on it. Refused appends:
// errors.test.js and below.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { BUILDS, assertAttentionError, bitIdentical, maxRelativeError, randomTensor, rng } from './helpers.js';

// A row rounded through q8 with float scales, written from the formula: d = max|x| / 127 in float32,
// q = round(x / d) with halves away from zero, then q · d in float32.
function roundQ8(data, width) {
  const out = new Float32Array(data.length);
  for (let row = 0; row < data.length; row += width)
    for (let first = row; first < row + width; first += 32) {
      const end = Math.min(first + 32, row + width);
      let amax = 0;
      for (let i = first; i < end; i++) amax = Math.max(amax, Math.abs(data[i]));
      const d = Math.fround(amax / 127);
      for (let i = first; i < end; i++) {
        const q = d > 0 ? Math.sign(data[i]) * Math.round(Math.abs(Math.fround(data[i] / d))) : 0;
        out[i] = Math.fround(q * d);
      }
    }
  return out;
}

for (const build of BUILDS) {
  describe(`q8 KV cache (${build.name} build)`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    test('an attend equals SDPA over the held keys with the query rounded through q8: every option, both paths, headDim 64, 40 and 8', () => {
      const random = rng(37);
      for (const headDim of [64, 40, 8]) {
        const cache = new attn.KVCache({ batch: 2, heads: 2, headDim, valueDim: 24, maxLength: 700, dtype: 'q8' });
        cache.append(randomTensor([2, 2, 700, headDim], random), randomTensor([2, 2, 700, 24], random));
        const keys = cache.keys(), values = cache.values();
        // 1 query per head takes the decode path (integer scores), 9 the packed tiles.
        for (const n of [1, 9]) {
          const q = randomTensor([2, 6, n, headDim], random);
          const rounded = { data: roundQ8(q.data, headDim), shape: q.shape };
          const padding = { data: Uint8Array.from({ length: 2 * 700 }, (_, i) => (i < 700 || i % 3 !== 0 ? 1 : 0)), shape: [2, 1, 1, 700] };
          for (const opts of [{}, { window: 300, softcap: 5, alibi: true }, { isCausal: false, scale: 0.3, attnMask: padding }, { needWeights: true }]) {
            const got = cache.attend(q, opts);
            const want = attn.scaledDotProductAttention(rounded, keys, values, {
              enableGqa: true, isCausal: opts.isCausal === false ? false : 'lowerRight', window: opts.window, softcap: opts.softcap,
              alibi: opts.alibi, scale: opts.scale, attnMask: opts.attnMask, needWeights: opts.needWeights,
            });
            const what = `headDim ${headDim}, n ${n}, ${JSON.stringify(Object.keys(opts))}`;
            assert.ok(maxRelativeError(got.output.data, want.output.data) <= 2e-6, `${what}: output`);
            if (opts.needWeights) assert.ok(maxRelativeError(got.weights.data, want.weights.data) <= 2e-6, `${what}: weights`);
          }
        }
        cache.dispose();
      }
    });

    test('q8 keeps a decode step within a few hundredths of an f32 cache (GQA 32 over 8, head dim 64)', () => {
      const random = rng(41);
      const key = randomTensor([1, 8, 600, 64], random), value = randomTensor([1, 8, 600, 64], random);
      const q = randomTensor([1, 32, 1, 64], random);
      const [exact, q8] = ['f32', 'q8'].map((dtype) => {
        const cache = new attn.KVCache({ heads: 8, headDim: 64, maxLength: 600, dtype }).append(key, value);
        const { output } = cache.attend(q);
        cache.dispose();
        return output.data;
      });
      // Each key and query element is off by up to 1/254 of its block's largest: scores of ~±1
      // move by ~1e-2, and the weighted values (means of ~600 normal values) by less.
      const error = q8.reduce((m, x, i) => Math.max(m, Math.abs(x - exact[i])), 0);
      assert.ok(error > 0 && error < 2e-2, `max abs difference ${error}`);
    });

    test('a ring (window) and a left-padded batch through GroupedQueryAttention: each row equals the row run alone', () => {
      const random = rng(43);
      const block = new attn.GroupedQueryAttention(64, 4, 2, { slidingWindow: 3, softcap: 20 });
      // 4 query heads over 2 key/value heads of 16.
      block.loadStateDict({
        'q_proj.weight': randomTensor([64, 64], random), 'k_proj.weight': randomTensor([32, 64], random),
        'v_proj.weight': randomTensor([32, 64], random), 'o_proj.weight': randomTensor([64, 64], random),
      });
      const x = randomTensor([1, 6, 64], random), steps = [randomTensor([1, 1, 64], random), randomTensor([1, 1, 64], random)];
      // Row 0 holds 8 tokens, row 1 x after two padding tokens.
      const padded = randomTensor([2, 8, 64], random);
      padded.data.set(x.data, 8 * 64 + 2 * 64);
      const attentionMask = { data: Uint8Array.from({ length: 16 }, (_, i) => (i < 8 || i >= 10 ? 1 : 0)), shape: [2, 8] };
      const batch = block.createCache(8, { batch: 2, dtype: 'q8' }), alone = block.createCache(8, { dtype: 'q8' });
      const first = block.forward(padded, { cache: batch, attentionMask }).output.data;
      const want = block.forward(x, { cache: alone }).output.data;
      assert.ok(maxRelativeError(first.subarray(8 * 64 + 2 * 64), want) <= 1e-5, 'prefill');
      for (const [i, step] of steps.entries()) {
        const both = { data: new Float32Array(2 * 64), shape: [2, 1, 64] };
        both.data.set(step.data, 0);
        both.data.set(step.data, 64);
        const got = block.forward(both, { cache: batch }).output.data;
        const row = block.forward(step, { cache: alone }).output.data;
        assert.ok(maxRelativeError(got.subarray(64), row) <= 1e-5, `step ${i}`);
      }
      assert.equal(batch.dtype, 'q8');
      for (const o of [batch, alone, block]) o.dispose();
    });

    test('a refused append (Infinity, or a scale past binary16) names where it is and keeps the cache', () => {
      const cache = new attn.KVCache({ heads: 2, headDim: 40, maxLength: 8, dtype: 'q8' });
      const random = rng(47);
      cache.append(randomTensor([1, 2, 3, 40], random), randomTensor([1, 2, 3, 40], random));
      const query = randomTensor([1, 4, 1, 40], random);
      const held = { keys: cache.keys().data, output: cache.attend(query).output.data };
      for (const [x, got] of [[Infinity, 'Infinity at batch 0, head 1, position 3, dim 37'], [8.4e6, '8400000 at batch 0, head 1, position 3, dim 37']]) {
        const key = randomTensor([1, 2, 1, 40], random);
        key.data[40 + 37] = x;
        const error = assertAttentionError(() => cache.append(key, randomTensor([1, 2, 1, 40], random)), AttentionError, 'key');
        assert.equal(error.got, got);
        assert.match(error.expected, /\|x\| < 8321040/);
        assert.equal(cache.length, 3);
        assert.ok(bitIdentical(cache.keys().data, held.keys) && bitIdentical(cache.attend(query).output.data, held.output));
      }
      cache.dispose();
    });
  });
}
