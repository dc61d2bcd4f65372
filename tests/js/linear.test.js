// attn.Linear against torch.nn.Linear (tests/fixtures/linear.json, float64): f32, f16 and bf16
// weights, with and without bias, ranks 1 to 3, sizes across the packing's panels and the work
// chunks, on every build and on two threads; 16-bit weights given as words or rounded from float32
// alike; a bf16 Linear bit for bit an f32 one holding the widened weights, its float32 weights
// rounded to nearest even; loadSafetensors(..., { dtype: 'f16' }) feeding it; half the memory; its
// errors.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { BUILDS, TOLERANCE, bitIdentical, maxRelativeError, randomTensor, rng, safetensorsBytes, toTensor } from './helpers.js';

const CASES = JSON.parse(readFileSync(new URL('../fixtures/linear.json', import.meta.url), 'utf8')).cases;

// The upper halves of float32 values: their bfloat16 words when the values are bfloat16s.
const upperHalves = (floats) => Uint16Array.from(new Uint32Array(Float32Array.from(floats).buffer), (bits) => bits >>> 16);
// bfloat16 words widened, exactly.
const widenBfloat16 = (words) => new Float32Array(Uint32Array.from(words, (word) => word << 16).buffer);

// A case's weight as float32 values, or (`words`) as the 16-bit words of its dtype.
function stateDictOf(c, words) {
  const shape = [c.outFeatures, c.inFeatures];
  const weight = !words ? toTensor(c.weight)
    : c.dtype === 'f16' ? { data: Uint16Array.from(c.weightHalfBits), shape, dtype: 'f16' }
      : { data: upperHalves(c.weight.data), shape, dtype: 'bf16' };
  return c.bias ? { weight, bias: toTensor(c.biasValues) } : { weight };
}

function checkCase(attn, c, words) {
  const linear = new attn.Linear(c.inFeatures, c.outFeatures, { bias: c.bias, dtype: c.dtype });
  linear.loadStateDict(stateDictOf(c, words));
  const output = linear.forward(toTensor(c.x));
  assert.deepEqual(output.shape, c.output.shape);
  const err = maxRelativeError(output.data, toTensor(c.output).data);
  assert.ok(err <= TOLERANCE, `${c.name}: max relative error ${err}`);
  linear.dispose();
}

for (const build of [...BUILDS, { name: 'two threads', opts: { threads: 2 } }]) {
  describe(`${build.name} build: Linear`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    for (const c of CASES) {
      test(c.name, () => {
        checkCase(attn, c, false);
        if (c.dtype !== 'f32') checkCase(attn, c, true);
      });
    }

    test('a bf16 Linear rounds float32 weights to nearest even and gives, bit for bit, an f32 Linear holding them widened', () => {
      // 130 outputs (three work chunks, a ragged panel), 300 rows (two row blocks). Each float32
      // weight lies at, just below or just above the midpoint between two bfloat16s, or on one.
      const [out, inFeatures] = [130, 20];
      const random = rng(41);
      const words = Uint16Array.from({ length: out * inFeatures }, () => upperHalves([(random() - 0.5) * 2 ** (8 * random() - 4)])[0]);
      const LOW = [0x8000, 0x7fff, 0x8001, 0, 0xffff];
      const floats = new Float32Array(Uint32Array.from(words, (word, i) => ((word << 16) | LOW[i % LOW.length]) >>> 0).buffer);
      const rounded = words.map((word, i) => {
        const low = LOW[i % LOW.length];
        return low < 0x8000 ? word : low > 0x8000 ? word + 1 : word + (word & 1);
      });
      const shape = [out, inFeatures], bias = randomTensor([out], random), x = randomTensor([300, inFeatures], random);
      const want = new attn.Linear(inFeatures, out).loadStateDict({ weight: { data: widenBfloat16(rounded), shape }, bias });
      for (const weight of [{ data: floats, shape }, { data: rounded, shape, dtype: 'bf16' }]) {
        const linear = new attn.Linear(inFeatures, out, { dtype: 'bf16' }).loadStateDict({ weight, bias });
        assert.ok(bitIdentical(linear.forward(x).data, want.forward(x).data), `weights given as ${weight.dtype ?? 'f32'}`);
        linear.dispose();
      }
      want.dispose();
    });
  });
}

describe('Linear', () => {
  let attn;
  before(async () => {
    attn = await init();
  });

  test('loadSafetensors(..., { dtype: "f16" }) feeds an f16 Linear, and a prefix selects the layer', () => {
    const c = CASES.find((k) => k.name === 'f16_bias_rank3');
    // A .safetensors file with the layer's F32 weight and bias under a prefix, among others.
    const bytes = safetensorsBytes({ 'model.proj.weight': toTensor(c.weight), 'model.proj.bias': toTensor(c.biasValues), 'model.other.weight': toTensor(c.weight) });
    const halves = attn.loadSafetensors(bytes, { dtype: 'f16' });
    assert.equal(halves.get('model.proj.weight').dtype, 'f16');
    const linear = new attn.Linear(c.inFeatures, c.outFeatures, { dtype: 'f16' });
    // The bias comes as f16 too: a bias is read as float32, so give it that way.
    linear.loadStateDict({ 'model.proj.weight': halves.get('model.proj.weight'), 'model.proj.bias': toTensor(c.biasValues) }, { prefix: 'model.proj.' });
    assert.ok(maxRelativeError(linear.forward(toTensor(c.x)).data, toTensor(c.output).data) <= TOLERANCE);
    linear.dispose();
  });

  test('f16 and bf16 Linears hold half the memory of an f32 one', async () => {
    // Fresh instances, and a layer large enough that the heap's growth steps do not blur it: the
    // weight's copy in and its packed form, 2 × 36 MiB in f32, 2 × 18 MiB in f16 and bf16.
    const size = 3072;
    const floats = randomTensor([size, size], rng(1));
    const halves = { data: new Uint16Array(size * size).fill(0x3c00), shape: [size, size], dtype: 'f16' };
    const bfloat16s = { data: new Uint16Array(size * size).fill(0x3f80), shape: [size, size], dtype: 'bf16' };
    const growth = async (dtype, weight) => {
      const fresh = await init();
      const before = fresh.stats().wasmHeapBytes;
      new fresh.Linear(size, size, { bias: false, dtype }).loadStateDict({ weight });
      const grown = fresh.stats().wasmHeapBytes - before;
      fresh.dispose();
      return grown;
    };
    const f32 = await growth('f32', floats), f16 = await growth('f16', halves), bf16 = await growth('bf16', bfloat16s);
    assert.ok(f32 >= 48 * 2 ** 20, `f32 grew the heap by ${f32} bytes`);
    assert.ok(f16 <= 0.6 * f32, `f16 grew the heap by ${f16} bytes, f32 by ${f32}`);
    assert.ok(bf16 <= 0.6 * f32, `bf16 grew the heap by ${bf16} bytes, f32 by ${f32}`);
  });

  test('a bf16 Linear takes binary16 weights widened then rounded, as it takes their float32 values', () => {
    const c = CASES.find((k) => k.name === 'f16_three_chunks_no_bias');
    const run = (weight) => {
      const linear = new attn.Linear(c.inFeatures, c.outFeatures, { bias: false, dtype: 'bf16' }).loadStateDict({ weight });
      const { data } = linear.forward(toTensor(c.x));
      linear.dispose();
      return data;
    };
    assert.ok(bitIdentical(run(stateDictOf(c, true).weight), run(toTensor(c.weight))));
  });

  test('bfloat16 Inf and NaN weights give what PyTorch gives; a float32 NaN stays NaN in bfloat16', () => {
    const linear = new attn.Linear(2, 3, { bias: false, dtype: 'bf16' });
    linear.loadStateDict({ weight: { data: Uint16Array.of(0x7f80, 0x3f80, 0x7fc0, 0x3f80, 0xff80, 0x3f80), shape: [3, 2], dtype: 'bf16' } });
    assert.deepEqual(Array.from(linear.forward({ data: Float32Array.of(1, 2), shape: [1, 2] }).data), [Infinity, NaN, -Infinity]);
    // A NaN whose payload is all in the bits bfloat16 drops, and the largest float32 (which rounds past bfloat16's largest).
    const nan = new Float32Array(Uint32Array.of(0x7f800001).buffer)[0];
    linear.loadStateDict({ weight: { data: Float32Array.of(nan, 1, 3.4028234663852886e38, 0, 1, 1), shape: [3, 2] } });
    assert.deepEqual(Array.from(linear.forward({ data: Float32Array.of(1, 2), shape: [1, 2] }).data), [NaN, Infinity, 3]);
    linear.dispose();
  });

  test('binary16 Inf and NaN weights give what PyTorch gives', () => {
    const linear = new attn.Linear(2, 2, { bias: false, dtype: 'f16' });
    linear.loadStateDict({ weight: { data: Uint16Array.of(0x7c00, 0x3c00, 0x7e00, 0x3c00), shape: [2, 2], dtype: 'f16' } });
    const { data } = linear.forward({ data: Float32Array.of(1, 2), shape: [1, 2] });
    assert.equal(data[0], Infinity);
    assert.ok(Number.isNaN(data[1]));
    linear.dispose();
  });

  test('forward(x, { out }) writes the result into the array given, the same values as a fresh one', () => {
    const linear = new attn.Linear(8, 5).loadStateDict({ weight: randomTensor([5, 8], rng(5)), bias: randomTensor([5], rng(6)) });
    const out = new Float32Array(3 * 5);
    for (const seed of [7, 8]) {
      const x = randomTensor([3, 8], rng(seed));
      const fresh = linear.forward(x);
      const into = linear.forward(x, { out });
      assert.equal(into.data, out, 'the array given, reused');
      assert.deepEqual(into.shape, [3, 5]);
      assert.deepEqual(into.data, fresh.data);
    }
    // A longer array takes the result at its start.
    const longer = new Float32Array(20).fill(7);
    const start = linear.forward(randomTensor([3, 8], rng(8)), { out: longer });
    assert.equal(start.data.buffer, longer.buffer);
    assert.deepEqual(start.data, linear.forward(randomTensor([3, 8], rng(8))).data);
    assert.deepEqual(Array.from(longer.subarray(15)), [7, 7, 7, 7, 7]);
    // No heap growth from writing into the caller's array, call after call.
    const heap = attn.stats().wasmHeapBytes;
    for (let i = 0; i < 20; i++) linear.forward(randomTensor([3, 8], rng(i)), { out });
    assert.equal(attn.stats().wasmHeapBytes, heap);
    linear.dispose();
  });

  test('bad weights and inputs name the entry, the expected and the given shape', () => {
    const linear = new attn.Linear(4, 3);
    const named = (fn, argument, ...parts) => assert.throws(fn, (err) => {
      assert.ok(err instanceof AttentionError);
      assert.equal(err.argument, argument);
      for (const part of parts) assert.ok(err.message.includes(part), `${err.message} includes ${part}`);
      return true;
    });
    const w = randomTensor([3, 4], rng(2)), b = randomTensor([3], rng(3));
    named(() => linear.loadStateDict({ 'l.weight': randomTensor([4, 3], rng(2)), 'l.bias': b }, { prefix: 'l.' }), "stateDict['l.weight']", '[3, 4]', 'got [4, 3]');
    named(() => linear.loadStateDict({ weight: w }), "stateDict['bias']", '[3]', 'a missing entry');
    named(() => linear.loadStateDict({ bias: b }), "stateDict['weight']", '[3, 4]', 'a missing entry');
    named(() => linear.loadStateDict({ weight: w, bias: b, extra: b }), "stateDict['extra']", 'this module has weight, bias');
    named(() => linear.loadStateDict({ weight: { data: new Uint16Array(5), shape: [3, 4], dtype: 'f16' }, bias: b }), "stateDict['weight'].data", 'length 12');
    named(() => linear.forward(randomTensor([2, 4], rng(4))), 'Linear', 'loadStateDict() before forward()');
    linear.loadStateDict({ weight: w, bias: b });
    named(() => linear.forward(randomTensor([2, 5], rng(4))), 'x', '[..., 4] (inFeatures last)', 'got [2, 5]');
    named(() => new attn.Linear(0, 3), 'inFeatures', 'an integer in [1, 2147483647]', 'got 0');
    named(() => new attn.Linear(2, 3, { dtype: 'f64' }), 'dtype', '"f32", "f16", "bf16"');
    named(() => linear.loadStateDict({ weight: { data: new Uint16Array(12), shape: [3, 4], dtype: 'bfloat16' }, bias: b }), "stateDict['weight'].data", "'bf16' (bfloat16)", 'with dtype "bfloat16"');
    named(() => new attn.Linear(4, 3, { bias: false }).loadStateDict({ weight: w, bias: b }), "stateDict['bias']", 'this module has weight');
    named(() => linear.forward(randomTensor([2, 4], rng(4)), { out: new Float32Array(5) }), 'out', 'a Float32Array of at least 6 elements (the result [2, 3])', 'got Float32Array(5)');
    named(() => linear.forward(randomTensor([2, 4], rng(4)), { out: new Float64Array(6) }), 'out', 'a Float32Array', 'got Float64Array(6)');
    named(() => linear.forward(randomTensor([2, 4], rng(4)), { outs: new Float32Array(6) }), 'outs', 'one of the options out');
    // The instance keeps working.
    assert.deepEqual(linear.forward({ data: new Float32Array(4), shape: [4] }).data, b.data);
    linear.dispose();
  });
});
