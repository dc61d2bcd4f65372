// The v2 options of scaledDotProductAttention and attn.rope on every build, beyond the PyTorch
// fixtures that sdpa.test.js runs: how the options relate to each other and to v1 calls, and RoPE
// against its fixtures. (Bad input: errors.test.js.)
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { init } from 'attention-wasm';

import { BUILDS, assertRopeCase, bitIdentical, loadRopeFixtures, maxRelativeError, randomTensor, rng } from './helpers.js';

// key/value [B, Hkv, m, d] with each head repeated `group` times along dim -3 (repeat_interleave).
function repeatHeads(t, group) {
  const [B, H, m, d] = t.shape;
  const block = m * d;
  const data = new Float32Array(B * H * group * block);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H * group; h++) data.set(t.data.subarray((b * H + Math.floor(h / group)) * block, (b * H + Math.floor(h / group) + 1) * block), (b * H * group + h) * block);
  return { shape: [B, H * group, m, d], data };
}

for (const build of BUILDS) {
  describe(`${build.name} build`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    test('grouped heads equal their key/value heads repeated (q [1, 8, 4, 16], k [1, 2, 10, 16])', () => {
      const random = rng(1);
      const q = randomTensor([1, 8, 4, 16], random), k = randomTensor([1, 2, 10, 16], random), v = randomTensor([1, 2, 10, 16], random);
      const grouped = attn.scaledDotProductAttention(q, k, v, { enableGqa: true, isCausal: 'lowerRight', needWeights: true });
      const repeated = attn.scaledDotProductAttention(q, repeatHeads(k, 4), repeatHeads(v, 4), { isCausal: 'lowerRight', needWeights: true });
      assert.deepEqual(grouped.output.shape, [1, 8, 4, 16]);
      assert.ok(bitIdentical(grouped.output.data, repeated.output.data));
      assert.ok(bitIdentical(grouped.weights.data, repeated.weights.data));
    });

    test("isCausal true is 'upperLeft'; a decode step under 'lowerRight' sees every key", () => {
      const random = rng(2);
      const q = randomTensor([2, 3, 5, 8], random), k = randomTensor([2, 3, 9, 8], random), v = randomTensor([2, 3, 9, 8], random);
      const legacy = attn.scaledDotProductAttention(q, k, v, { isCausal: true, needWeights: true });
      const upperLeft = attn.scaledDotProductAttention(q, k, v, { isCausal: 'upperLeft', needWeights: true });
      assert.ok(bitIdentical(legacy.weights.data, upperLeft.weights.data));
      // Query 0 under the top-left rule sees key 0 only; the last query of a decode step sees all.
      assert.equal(legacy.weights.data[0], 1);
      const step = randomTensor([2, 3, 1, 8], random);
      const decode = attn.scaledDotProductAttention(step, k, v, { isCausal: 'lowerRight' });
      const unmasked = attn.scaledDotProductAttention(step, k, v);
      assert.ok(bitIdentical(decode.output.data, unmasked.output.data));
    });

    test("alibi: true gives Press et al.'s slopes for 12 heads (8 of 8 heads, then 4 of 16)", () => {
      const random = rng(3);
      const q = randomTensor([1, 12, 6, 8], random), k = randomTensor([1, 12, 20, 8], random), v = randomTensor([1, 12, 20, 8], random);
      const slopes = Float32Array.from({ length: 12 }, (_, h) => (h < 8 ? 2 ** (-(h + 1)) : 2 ** (-(2 * (h - 8) + 1) / 2)));
      const press = attn.scaledDotProductAttention(q, k, v, { alibi: true, isCausal: 'lowerRight', needWeights: true });
      const given = attn.scaledDotProductAttention(q, k, v, { alibi: slopes, isCausal: 'lowerRight', needWeights: true });
      assert.ok(bitIdentical(press.weights.data, given.weights.data));
    });

    test('window, documents and a mask combine with dropout: hidden keys keep weight 0, a seed reproduces', () => {
      const random = rng(4);
      const q = randomTensor([2, 2, 70, 8], random), k = randomTensor([2, 2, 70, 8], random), v = randomTensor([2, 2, 70, 8], random);
      const documentIds = { shape: [70], data: Int32Array.from({ length: 70 }, (_, i) => (i < 45 ? 0 : 1)) };
      const opts = { isCausal: 'lowerRight', window: 9, documentIds, softcap: 5, alibi: true, dropoutP: 0.3, seed: 11, needWeights: true };
      const a = attn.scaledDotProductAttention(q, k, v, opts);
      const b = attn.scaledDotProductAttention(q, k, v, opts);
      assert.ok(bitIdentical(a.weights.data, b.weights.data));
      const streaming = attn.scaledDotProductAttention(q, k, v, { ...opts, needWeights: false });
      assert.ok(maxRelativeError(streaming.output.data, a.output.data) <= 1e-6);
      let dropped = 0;
      for (let blk = 0; blk < 4; blk++)
        for (let i = 0; i < 70; i++)
          for (let j = 0; j < 70; j++) {
            const w = a.weights.data[(blk * 70 + i) * 70 + j];
            const visible = j <= i && i - j < 9 && (i < 45) === (j < 45);
            if (!visible) assert.equal(w, 0, `hidden key ${j} of query ${i}`);
            else if (w === 0) dropped++;
          }
      assert.ok(dropped > 0, 'dropout dropped some visible keys');
    });

    describe('rope', () => {
      for (const c of loadRopeFixtures()) {
        test(c.name, () => {
          assertRopeCase(attn, c);
        });
      }
      test('positions given equal an offset', () => {
        const x = randomTensor([2, 5, 16], rng(5));
        const byOffset = attn.rope(x, { offset: 7 });
        const byPositions = attn.rope(x, { positions: [7, 8, 9, 10, 11] });
        assert.ok(bitIdentical(byOffset.data, byPositions.data));
      });
    });
  });
}
