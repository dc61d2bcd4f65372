// attn.feedForward against Hugging Face's MLP blocks (tests/fixtures/feed_forward.json, float64):
// gated (Llama, Gemma), plain (GPT-2, BERT) and fused (Phi-3), every activation config.json names,
// f32, f16 and bf16 weights, biases, inputs longer than one pass of 512 rows and empty ones, on
// every build; rows independent of how they are split; its errors, after which the instance works on
// and its memory stays as it was.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { BUILDS, assertAttentionError, assertClose, bitIdentical, randomTensor, rng, toTensor } from './helpers.js';

const CASES = JSON.parse(readFileSync(new URL('../fixtures/feed_forward.json', import.meta.url), 'utf8')).cases;

// The case's Linear modules, loaded: { gate?, up?, gateUp?, down }.
function partsOf(attn, c) {
  return Object.fromEntries(Object.entries(c.weights).map(([name, { weight, bias }]) => {
    const [out, inFeatures] = weight.shape;
    const linear = new attn.Linear(inFeatures, out, { bias: c.bias, dtype: c.dtype });
    linear.loadStateDict(bias ? { weight: toTensor(weight), bias: toTensor(bias) } : { weight: toTensor(weight) });
    return [name, linear];
  }));
}

const disposeAll = (parts) => Object.values(parts).forEach((linear) => linear.dispose());

for (const build of BUILDS) {
  describe(`${build.name} build: feedForward`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    for (const c of CASES) {
      test(c.name, () => {
        const parts = partsOf(attn, c);
        assertClose(attn.feedForward(toTensor(c.x), parts, { activation: c.activation }), toTensor(c.output), c.name);
        // Into a caller's array, longer than the result.
        const out = new Float32Array(c.output.data.length + 3).fill(7);
        const given = attn.feedForward(toTensor(c.x), parts, { activation: c.activation, out });
        assert.equal(given.data.buffer, out.buffer);
        assertClose(given, toTensor(c.output), `${c.name} into out`);
        assert.deepEqual([...out.subarray(c.output.data.length)], [7, 7, 7]);
        disposeAll(parts);
      });
    }
  });
}

describe('feedForward', () => {
  let attn;
  before(async () => {
    attn = await init();
  });

  test('rows are independent: 600 rows in passes of 512 give the bits of any split of them', () => {
    const c = CASES.find((k) => k.name === 'gpt2_gelu_new_bias');
    const parts = partsOf(attn, c);
    const x = randomTensor([600, c.weights.up.weight.shape[1]], rng(5));
    const whole = attn.feedForward(x, parts, { activation: 'gelu_new' });
    const rowsOf = (tensor, begin, end) => {
      const width = tensor.shape.at(-1);
      return { data: tensor.data.subarray(begin * width, end * width), shape: [end - begin, width] };
    };
    for (const [begin, end] of [[0, 1], [1, 512], [512, 600]]) {
      const part = attn.feedForward(rowsOf(x, begin, end), parts, { activation: 'gelu_new' });
      assert.ok(bitIdentical(part.data, rowsOf(whole, begin, end).data), `rows ${begin}..${end}`);
    }
    disposeAll(parts);
  });

  test('gelu_new and gelu_pytorch_tanh are one formula; gelu is the erf form', () => {
    const c = CASES.find((k) => k.name === 'gpt2_gelu_new_bias');
    const parts = partsOf(attn, c);
    const x = toTensor(c.x);
    const run = (activation) => attn.feedForward(x, parts, { activation }).data;
    assert.ok(bitIdentical(run('gelu_new'), run('gelu_pytorch_tanh')));
    assert.ok(!bitIdentical(run('gelu_new'), run('gelu')));
    disposeAll(parts);
  });

  test('bad parts, shapes and options are refused naming the argument; the heap stays as it was', () => {
    const c = CASES.find((k) => k.name === 'llama_silu');
    const parts = partsOf(attn, c);
    const x = toTensor(c.x);
    const run = (p, opts = { activation: 'silu' }, input = x) => () => attn.feedForward(input, p, opts);
    // Warm the heap with one good call first: the failing calls below must not grow it.
    attn.feedForward(x, parts, { activation: 'silu' });
    const heap = attn.stats().wasmHeapBytes;
    assertAttentionError(run(parts, {}), AttentionError, 'activation', ["'silu'", 'none']);
    assertAttentionError(run(parts, { activation: 'relu' }), AttentionError, 'activation', ['"gelu_new"', 'relu']);
    assertAttentionError(run(null), AttentionError, 'parts', ['gateUp']);
    assertAttentionError(run({ ...parts, fc: parts.up }), AttentionError, 'parts.fc', ['no such part']);
    assertAttentionError(run({ gate: parts.gate, up: parts.up }), AttentionError, 'parts.down', ['a Linear', 'none']);
    assertAttentionError(run({ ...parts, down: {} }), AttentionError, 'parts.down', ['a Linear of this instance']);
    assertAttentionError(run({ gate: parts.gate, down: parts.down }), AttentionError, 'parts.up', ['neither']);
    assertAttentionError(run({ ...parts, gateUp: parts.gate }), AttentionError, 'parts.gateUp', ['both']);
    // Shapes: gate unlike up, down not reading the hidden width, x not ending in inFeatures.
    const [inner, inFeatures] = c.weights.gate.weight.shape;
    const narrow = new attn.Linear(inFeatures, inner - 1, { bias: false });
    narrow.loadStateDict({ weight: randomTensor([inner - 1, inFeatures], rng(2)) });
    assertAttentionError(run({ ...parts, gate: narrow }), AttentionError, 'parts.gate', [`Linear(${inFeatures}, ${inner})`, `Linear(${inFeatures}, ${inner - 1})`]);
    assertAttentionError(run({ gate: parts.gate, up: parts.up, down: parts.gate }), AttentionError, 'parts.down', [`Linear(${inner}, ...)`]);
    assertAttentionError(run(parts, undefined, { data: new Float32Array(3 * (inFeatures + 1)), shape: [3, inFeatures + 1] }), AttentionError, 'x',
      [`[..., ${inFeatures}]`, `[3, ${inFeatures + 1}]`]);
    assertAttentionError(run(parts, { activation: 'silu', out: new Float32Array(2) }), AttentionError, 'out', ['Float32Array of at least']);
    // A Linear without weights, a disposed one, one of another instance.
    const empty = new attn.Linear(inFeatures, inner, { bias: false });
    assertAttentionError(run({ ...parts, up: empty }), AttentionError, 'parts.up', ['loadStateDict()']);
    empty.dispose();
    assertAttentionError(run({ ...parts, up: empty }), AttentionError, 'parts.up', ['disposed']);
    assert.equal(attn.stats().wasmHeapBytes, heap);
    assertClose(attn.feedForward(x, parts, { activation: 'silu' }), toTensor(c.output), 'after the errors');
    narrow.dispose();
    disposeAll(parts);
  });

  test('a Linear of another instance is refused', async () => {
    const other = await init();
    const c = CASES.find((k) => k.name === 'llama_silu');
    const parts = partsOf(attn, c), foreign = partsOf(other, c);
    assertAttentionError(() => attn.feedForward(toTensor(c.x), { ...parts, up: foreign.up }, { activation: 'silu' }), AttentionError, 'parts.up',
      ['a Linear of this instance']);
    disposeAll(parts);
    other.dispose();
  });
});
