// Padding that cannot go silently wrong: a KVCache keeps Hugging Face's attention_mask with the
// positions it holds (through truncate, reset and a ring's wrap) and hides padded keys from every
// later attend; GroupedQueryAttention numbers positions as generate() does. The per-family
// fixtures (checkpoints.test.js) check padded batches against Hugging Face; these check the
// mechanics against the explicit masks and positions they stand for.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { init } from 'attention-wasm';

import { BUILDS, maxRelativeError, randomTensor, rng } from './helpers.js';

const tokens = (rows) => ({ data: Uint8Array.from(rows.flat()), shape: [rows.length, rows[0].length] });

// The same cache's attention, the held mask passed explicitly as attnMask [batch, 1, 1, length].
function explicitAttend(attn, cache, query) {
  const plain = new attn.KVCache({ batch: cache.batch, heads: cache.heads, headDim: cache.headDim, maxLength: cache.maxLength });
  plain.append(cache.keys(), cache.values());
  const held = cache.mask();
  const output = plain.attend(query, { attnMask: { data: held.data, shape: [held.shape[0], 1, 1, held.shape[1]] } }).output;
  plain.dispose();
  return output;
}

// A GroupedQueryAttention(16, 4, 2) with random weights.
function smallBlock(attn, random) {
  return new attn.GroupedQueryAttention(16, 4, 2, { ropeBase: 100 }).loadStateDict({
    'q_proj.weight': randomTensor([16, 16], random), 'k_proj.weight': randomTensor([8, 16], random),
    'v_proj.weight': randomTensor([8, 16], random), 'o_proj.weight': randomTensor([16, 16], random),
  });
}

for (const build of BUILDS) {
  describe(`${build.name} build: padding`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    test('a KVCache keeps the mask it is given, through truncate, reset and appends without one', () => {
      const random = rng(1);
      const cache = new attn.KVCache({ batch: 2, heads: 1, headDim: 4, maxLength: 8 });
      assert.deepEqual(cache.mask(), { data: new Uint8Array(0), shape: [2, 0] });
      cache.append(randomTensor([2, 1, 3, 4], random), randomTensor([2, 1, 3, 4], random), { mask: tokens([[1, 1, 1], [0, 1, 1]]) });
      cache.append(randomTensor([2, 1, 1, 4], random), randomTensor([2, 1, 1, 4], random));
      assert.deepEqual(cache.mask(), tokens([[1, 1, 1, 1], [0, 1, 1, 1]]));
      cache.truncate(2);
      assert.deepEqual(cache.mask(), tokens([[1, 1], [0, 1]]));
      cache.reset();
      cache.append(randomTensor([2, 1, 2, 4], random), randomTensor([2, 1, 2, 4], random), { mask: { data: [true, false, 1n, 0n], shape: [2, 2] } });
      assert.deepEqual(cache.mask(), tokens([[1, 0], [1, 0]]));
      cache.dispose();
    });

    test("a ring's mask follows its keys: the latest window − 1 + t positions", () => {
      const random = rng(2);
      const cache = new attn.KVCache({ batch: 2, heads: 2, headDim: 4, maxLength: 4, window: 3 });
      cache.append(randomTensor([2, 2, 4, 4], random), randomTensor([2, 2, 4, 4], random), { mask: tokens([[0, 0, 1, 1], [0, 1, 1, 1]]) });
      assert.deepEqual(cache.mask(), tokens([[0, 0, 1, 1], [0, 1, 1, 1]]));
      for (let step = 0; step < 5; step++) cache.append(randomTensor([2, 2, 1, 4], random), randomTensor([2, 2, 1, 4], random));
      assert.deepEqual(cache.mask(), tokens([[1, 1, 1], [1, 1, 1]]));
      cache.dispose();
    });

    test('attend hides the padded keys it holds, as the same mask passed as attnMask (f32 and f16, grouped heads)', () => {
      const random = rng(3);
      for (const dtype of ['f32', 'f16']) {
        const cache = new attn.KVCache({ batch: 3, heads: 2, headDim: 16, maxLength: 700, dtype });
        // Long enough that the decode step splits its keys across the engine's chunks.
        const mask = Array.from({ length: 3 }, (_, b) => Array.from({ length: 600 }, (_, j) => (j >= 100 * b ? 1 : 0)));
        cache.append(randomTensor([3, 2, 600, 16], random), randomTensor([3, 2, 600, 16], random), { mask: tokens(mask) });
        for (const n of [1, 3]) {
          cache.append(randomTensor([3, 2, n, 16], random), randomTensor([3, 2, n, 16], random));
          const query = randomTensor([3, 8, n, 16], random);
          const got = cache.attend(query).output;
          const want = explicitAttend(attn, cache, query);
          assert.ok(maxRelativeError(got.data, want.data) <= 1e-6, `${dtype}, n = ${n}`);
        }
        cache.dispose();
      }
    });

    test("GroupedQueryAttention's default positions are generate()'s: cumsum(attentionMask) − 1, counted on by the cache", () => {
      const random = rng(4);
      const block = smallBlock(attn, random);
      const attentionMask = tokens([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]);
      const x = randomTensor([2, 5, 16], random);
      const implicit = block.createCache(8, { batch: 2 });
      const explicit = block.createCache(8, { batch: 2 });
      const got = block.forward(x, { cache: implicit, attentionMask }).output;
      const positions = { data: Int32Array.from([0, 0, 0, 1, 2, 0, 1, 2, 3, 4]), shape: [2, 5] };
      const want = block.forward(x, { cache: explicit, attentionMask, positions }).output;
      assert.deepEqual(got, want);
      const step = randomTensor([2, 1, 16], random);
      assert.deepEqual(
        block.forward(step, { cache: implicit }).output,
        block.forward(step, { cache: explicit, positions: { data: Int32Array.from([3, 5]), shape: [2, 1] } }).output,
      );
      for (const object of [implicit, explicit, block]) object.dispose();
    });

    test('without a cache, an attentionMask hides padded keys from every query and pads positions at 0', () => {
      const random = rng(5);
      const block = smallBlock(attn, random);
      const alone = randomTensor([1, 3, 16], random);
      const padded = { data: new Float32Array(5 * 16), shape: [1, 5, 16] };
      padded.data.fill(7, 0, 2 * 16);
      padded.data.set(alone.data, 2 * 16);
      const got = block.forward(padded, { attentionMask: tokens([[0, 0, 1, 1, 1]]), needWeights: true });
      const want = block.forward(alone, { needWeights: true });
      assert.ok(maxRelativeError(got.output.data.subarray(2 * 16), want.output.data) <= 1e-6);
      // The padded queries see no key: zero weights, as every fully masked row.
      assert.deepEqual([...got.weights.data.subarray(0, 5)], [0, 0, 0, 0, 0]);
      block.dispose();
    });
  });
}
