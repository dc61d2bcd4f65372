// GroupedQueryAttention with bfloat16 projections (dtype: 'bf16', as Linear's), on every build: a
// block given bfloat16 weights gives bit for bit what an f32 block given them widened gives, with
// and without a cache, whichever entries come as words (biases and QK-norms widen), Phi-3's fused
// qkv_proj included; fromConfig takes the dtype; the block holds half the memory. (Bad input:
// errors.test.js; the rounding of float32 and binary16 weights, shared with Linear: linear.test.js.)
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { init } from 'attention-wasm';

import { BUILDS, bitIdentical, randomTensor, rng } from './helpers.js';

// hidden 40 (5 panels: a ragged work chunk), 4 query heads over 2, head size 10.
const OPTIONS = { headDim: 10, qkvBias: true, outputBias: true, qkNorm: { scope: 'head' } };
const SHAPES = {
  'q_proj.weight': [40, 40], 'k_proj.weight': [20, 40], 'v_proj.weight': [20, 40], 'o_proj.weight': [40, 40],
  'q_proj.bias': [40], 'k_proj.bias': [20], 'v_proj.bias': [20], 'o_proj.bias': [40], 'q_norm.weight': [10], 'k_norm.weight': [10],
};

// Every entry as bfloat16 words (the upper halves of random floats), and as the floats they widen to.
const random = rng(3);
const WORDS = Object.fromEntries(Object.entries(SHAPES).map(([name, shape]) => {
  const { data } = randomTensor(shape, random);
  return [name, { data: Uint16Array.from(new Uint32Array(data.buffer), (bits) => bits >>> 16), shape, dtype: 'bf16' }];
}));
const FLOATS = Object.fromEntries(Object.entries(WORDS).map(([name, { data, shape }]) =>
  [name, { data: new Float32Array(Uint32Array.from(data, (word) => word << 16).buffer), shape }]));

// Each result of a block: a forward of two rows with weights, then a prefill and two decode steps
// through a cache.
function results(attn, dtype, stateDict) {
  const block = new attn.GroupedQueryAttention(40, 4, 2, { ...OPTIONS, dtype }).loadStateDict(stateDict);
  assert.equal(block.dtype, dtype);
  const inputs = rng(4);
  const full = block.forward(randomTensor([2, 5, 40], inputs), { needWeights: true });
  const cache = block.createCache(8);
  const steps = [4, 1, 1].map((t) => block.forward(randomTensor([1, t, 40], inputs), { cache, needWeights: true }));
  cache.dispose();
  block.dispose();
  return [full, ...steps].flatMap(({ output, weights }) => [output.data, weights.data]);
}

for (const build of BUILDS) {
  describe(`${build.name} build: GroupedQueryAttention with bf16 weights`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    test('a bf16 block given bfloat16 words gives what an f32 block given them widened gives, bit for bit', () => {
      const want = results(attn, 'f32', FLOATS);
      const fused = {
        data: Uint16Array.of(...WORDS['q_proj.weight'].data, ...WORDS['k_proj.weight'].data, ...WORDS['v_proj.weight'].data),
        shape: [80, 40], dtype: 'bf16',
      };
      const { 'q_proj.weight': q, 'k_proj.weight': k, 'v_proj.weight': v, ...rest } = WORDS;
      const mixed = Object.fromEntries(Object.keys(WORDS).map((name, i) => [name, i % 2 ? WORDS[name] : FLOATS[name]]));
      for (const [what, dtype, stateDict] of [
        ['bfloat16 words', 'bf16', WORDS], ['the widened floats', 'bf16', FLOATS], ['words and floats mixed', 'bf16', mixed],
        ["Phi-3's fused qkv_proj as words", 'bf16', { 'qkv_proj.weight': fused, ...rest }], ['bfloat16 words, into an f32 block', 'f32', WORDS],
      ]) {
        const got = results(attn, dtype, stateDict);
        got.forEach((data, i) => assert.ok(bitIdentical(data, want[i]), `${what}: result ${i} differs`));
      }
    });
  });
}

describe('GroupedQueryAttention with bf16 weights', () => {
  test('fromConfig takes dtype bf16', async () => {
    const attn = await init();
    const block = attn.GroupedQueryAttention.fromConfig({ model_type: 'llama', hidden_size: 16, num_attention_heads: 4 }, { dtype: 'bf16' });
    assert.equal(block.dtype, 'bf16');
    attn.dispose();
  });

  test('a bf16 block holds half the memory of an f32 one', async () => {
    // Fresh instances, and projections large enough that the heap's growth steps do not blur them:
    // each weight's copy in and its packed form, 2 × 4 × 4 MiB in f32.
    const weights = (dtype) => Object.fromEntries(['q_proj', 'k_proj', 'v_proj', 'o_proj'].map((name) => {
      const shape = [1024, 1024];
      return [`${name}.weight`, dtype === 'f32' ? { data: new Float32Array(1024 * 1024).fill(1), shape } : { data: new Uint16Array(1024 * 1024).fill(0x3f80), shape, dtype }];
    }));
    const growth = async (dtype) => {
      const fresh = await init();
      const before = fresh.stats().wasmHeapBytes;
      new fresh.GroupedQueryAttention(1024, 8, 8, { dtype }).loadStateDict(weights(dtype));
      const grown = fresh.stats().wasmHeapBytes - before;
      fresh.dispose();
      return grown;
    };
    const f32 = await growth('f32'), bf16 = await growth('bf16');
    assert.ok(f32 >= 24 * 2 ** 20, `f32 grew the heap by ${f32} bytes`);
    assert.ok(bf16 <= 0.6 * f32, `bf16 grew the heap by ${bf16} bytes, f32 by ${f32}`);
  });
});
