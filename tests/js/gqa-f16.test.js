// GroupedQueryAttention with binary16 projections (dtype: 'f16', as Linear's): on the viewer's
// Hugging Face checkpoints (tests/fixtures/models/: Llama, Qwen3 and Gemma 3 with QK-norm, OLMo 2's
// whole-projection norm, Gemma 2's softcap and window, Phi-3's fused qkv_proj and partial RoPE),
// read with loadSafetensors(…, { dtype: 'f16' }), a block gives bit for bit what the same block
// gives with those weights widened to float32, with and without a KV cache, on every build, and
// whichever dtype each entry comes in; it holds half the memory; bad binary16 input names the entry.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { BUILDS, assertAttentionError, bitIdentical, randomTensor, rng } from './helpers.js';

const ROOT = new URL('../fixtures/models/', import.meta.url);
const MODELS = readdirSync(ROOT).sort().map((name) => ({
  name,
  config: JSON.parse(readFileSync(new URL(`${name}/config.json`, ROOT), 'utf8')),
  bytes: readFileSync(new URL(`${name}/model.safetensors`, ROOT)),
})).filter((m) => ['llama', 'qwen3', 'gemma2', 'gemma3_text', 'olmo2', 'phi3'].includes(m.config.model_type));

// Exact: every binary16 is a float32.
function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 31) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

const widen = (tensor) => ({ data: Float32Array.from(tensor.data, halfToFloat), shape: tensor.shape });

// Every output of `block` on one input: a forward without a cache (with weights), then a prefill
// of 4 and three decode steps through a cache.
function outputs(block, hiddenSize) {
  const random = rng(5);
  const results = [];
  const full = block.forward(randomTensor([2, 5, hiddenSize], random), { needWeights: true });
  results.push(full.output.data, full.weights.data);
  const cache = block.createCache(8);
  results.push(block.forward(randomTensor([1, 4, hiddenSize], random), { cache }).output.data);
  for (let i = 0; i < 3; i++) results.push(block.forward(randomTensor([1, 1, hiddenSize], random), { cache, needWeights: true }).output.data);
  cache.dispose();
  return results;
}

function assertSameOutputs(got, want, what) {
  assert.equal(got.length, want.length);
  got.forEach((data, i) => assert.ok(bitIdentical(data, want[i]), `${what}: output ${i} differs`));
}

for (const build of BUILDS) {
  describe(`${build.name} build: GroupedQueryAttention with f16 weights`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    for (const m of MODELS) {
      test(`${m.name} (${m.config.model_type}): an f16 block gives what the block with the weights widened to f32 gives`, () => {
        const halves = attn.loadSafetensors(m.bytes, { dtype: 'f16' });
        const floats = new Map([...halves].map(([name, tensor]) => [name, widen(tensor)]));
        for (const layer of [0, 1]) {
          const prefix = `model.layers.${layer}.self_attn.`;
          const run = (dtype, stateDict) => {
            const block = attn.GroupedQueryAttention.fromConfig(m.config, { layer, dtype }).loadStateDict(stateDict, { prefix });
            assert.equal(block.dtype, dtype ?? 'f32');
            try {
              return outputs(block, block.hiddenSize);
            } finally {
              block.dispose();
            }
          };
          const want = run(undefined, floats);
          assertSameOutputs(run('f16', halves), want, `layer ${layer}: f16 block, binary16 weights`);
          // Binary16 weights widen into an f32 block, and f32 ones that binary16 holds exactly
          // round into an f16 block unchanged; one state dict may mix them.
          assertSameOutputs(run('f32', halves), want, `layer ${layer}: f32 block, binary16 weights`);
          assertSameOutputs(run('f16', floats), want, `layer ${layer}: f16 block, float32 weights`);
          const mixed = new Map([...halves].map(([name, tensor], i) => [name, i % 2 ? tensor : floats.get(name)]));
          assertSameOutputs(run('f16', mixed), want, `layer ${layer}: f16 block, mixed weights`);
        }
      });
    }
  });
}

test('an f16 GroupedQueryAttention grows the heap by half what an f32 one does', async (t) => {
  // Fresh instances, and projections large enough that the heap's growth steps do not blur them:
  // 4 × 9 MiB in f32 for each of the weights' copy in, their loaded copy and their packed form.
  const h = 1536;
  const growth = async (dtype) => {
    const fresh = await init();
    const weight = () => (dtype === 'f16'
      ? { data: new Uint16Array(h * h).fill(0x211f), shape: [h, h], dtype: 'f16' }
      : { data: new Float32Array(h * h).fill(0.01), shape: [h, h] });
    const stateDict = { 'q_proj.weight': weight(), 'k_proj.weight': weight(), 'v_proj.weight': weight(), 'o_proj.weight': weight() };
    const before = fresh.stats().wasmHeapBytes;
    const block = new fresh.GroupedQueryAttention(h, 12, 12, { dtype }).loadStateDict(stateDict);
    const grown = fresh.stats().wasmHeapBytes - before;
    block.forward({ data: new Float32Array(h), shape: [1, 1, h] });
    fresh.dispose();
    return grown;
  };
  const f32 = await growth('f32'), f16 = await growth('f16');
  const MiB = 2 ** 20;
  t.diagnostic(`heap growth: f32 ${(f32 / MiB).toFixed(1)} MiB, f16 ${(f16 / MiB).toFixed(1)} MiB`);
  assert.ok(f32 >= 80 * MiB, `f32 grew the heap by ${f32 / MiB} MiB`);
  assert.ok(f16 <= 0.6 * f32, `f16 grew the heap by ${f16 / MiB} MiB, f32 by ${f32 / MiB} MiB`);
});

test('bad binary16 weights name the entry, the expected and the given; the block keeps working', async () => {
  const attn = await init();
  const half = (shape) => ({ data: new Uint16Array(shape.reduce((a, b) => a * b, 1)).fill(0x2e66), shape, dtype: 'f16' });
  const good = { 'q_proj.weight': half([16, 16]), 'k_proj.weight': half([8, 16]), 'v_proj.weight': half([8, 16]), 'o_proj.weight': half([16, 16]) };
  const block = new attn.GroupedQueryAttention(16, 4, 2, { dtype: 'f16' }).loadStateDict(good);
  const x = randomTensor([1, 3, 16], rng(1));
  const before = block.forward(x).output.data;
  const bad = (stateDict, argument, message, opts) => {
    assertAttentionError(() => block.loadStateDict(stateDict, opts), AttentionError, argument, message);
    assert.ok(bitIdentical(block.forward(x).output.data, before), 'the block keeps its weights');
  };
  const bits = (shape) => ({ data: new Uint16Array(shape[0] * shape[1]), shape });
  bad({ ...good, 'k_proj.weight': bits([8, 16]) }, "stateDict['k_proj.weight'].data",
    ["a Float32Array, or 16-bit words in a Uint16Array with dtype: 'f16' (binary16) or 'bf16' (bfloat16)", 'got Uint16Array(128) without a dtype']);
  bad({ ...good, 'k_proj.weight': { ...bits([8, 16]), dtype: 'bfloat16' } }, "stateDict['k_proj.weight'].data", ['got Uint16Array(128) with dtype "bfloat16"']);
  bad({ ...good, 'k_proj.weight': { data: new Float32Array(128), shape: [8, 16], dtype: 'f16' } }, "stateDict['k_proj.weight'].data", ['got Float32Array(128) with dtype "f16"']);
  bad({ ...good, 'v_proj.weight': half([16, 16]) }, "stateDict['v_proj.weight']", ['[8, 16]', 'got [16, 16]']);
  bad({ ...good, 'o_proj.weight': { data: new Uint16Array(5), shape: [16, 16], dtype: 'f16' } }, "stateDict['o_proj.weight'].data", ['length 256', 'length 5']);
  const { 'q_proj.weight': q, 'k_proj.weight': k, 'v_proj.weight': v, ...rest } = good;
  bad({ ...rest, 'l.qkv_proj.weight': half([24, 16]) }, "stateDict['l.qkv_proj.weight']", ['[32, 16] (the rows of q_proj, k_proj and v_proj)', 'got [24, 16]'], { prefix: 'l.' });
  bad({ ...rest, 'qkv_proj.weight': bits([32, 16]) }, "stateDict['qkv_proj.weight'].data", ['got Uint16Array(512) without a dtype']);
  assertAttentionError(() => new attn.GroupedQueryAttention(16, 4, 2, { dtype: 'f64' }), AttentionError, 'dtype', ['"f32", "f16", "bf16"', 'got "f64"']);
  assertAttentionError(() => attn.GroupedQueryAttention.fromConfig({ model_type: 'llama', hidden_size: 16, num_attention_heads: 4 }, { dtype: 'f8' }), AttentionError, 'dtype', ['got "f8"']);
  // Biases and norms may come as binary16 too (widened): Phi-3's fused weight as well.
  const fused = new Uint16Array(32 * 16);
  [q, k, v].reduce((at, t) => (fused.set(t.data, at), at + t.data.length), 0);
  const normed = new attn.GroupedQueryAttention(16, 4, 2, { qkNorm: { scope: 'head' }, qkvBias: true, dtype: 'f16' });
  normed.loadStateDict({
    'qkv_proj.weight': { data: fused, shape: [32, 16], dtype: 'f16' }, 'o_proj.weight': good['o_proj.weight'],
    'q_proj.bias': half([16]), 'k_proj.bias': half([8]), 'v_proj.bias': half([8]), 'q_norm.weight': half([4]), 'k_norm.weight': half([4]),
  });
  assert.ok(normed.forward(x).output.data.every(Number.isFinite));
  attn.dispose();
});
