// KVCache and GroupedQueryAttention on every build: the PyTorch fixtures of kv_cache.json (append /
// attend / truncate / reset sequences, f32 and f16, rings) and gqa.json (Llama, Qwen2, Gemma 2 and
// Mistral blocks, with and without a cache, some with Hugging Face's head_mask), then what ties the
// paths together: prefill-then-decode against one full forward, the decode path against SDPA, the
// head mask with every other option, and the caches' lifetime. (Bad input: errors.test.js.)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { BUILDS, TOLERANCE, bitIdentical, maxRelativeError, randomTensor, rng, toMask, toTensor } from './helpers.js';

function readCases(file) {
  return JSON.parse(readFileSync(new URL(`../fixtures/${file}`, import.meta.url), 'utf8')).cases;
}

const cacheCases = readCases('kv_cache.json');
const blockCases = readCases('gqa.json');

// A fixture's attend options as the API takes them.
function attendOptions(o) {
  const opts = { isCausal: o.isCausal, needWeights: o.needWeights };
  for (const option of ['scale', 'softcap', 'window']) if (o[option] !== null) opts[option] = o[option];
  if (o.alibi !== null) opts.alibi = o.alibi === true ? true : toTensor(o.alibi).data;
  if (o.attnMask !== null) opts.attnMask = toMask(o.attnMask);
  return opts;
}

function assertClose(got, want, what, tolerance = TOLERANCE) {
  assert.deepEqual(got.shape, want.shape, `${what} shape`);
  const err = maxRelativeError(got.data, want.data);
  assert.ok(err <= tolerance, `${what}: max relative error ${err} > ${tolerance}`);
}

// Runs one kv_cache.json case step by step on `attn`.
function runCacheCase(attn, c) {
  const cache = new attn.KVCache({
    batch: c.batch, heads: c.heads, headDim: c.headDim, valueDim: c.valueDim, maxLength: c.maxLength, dtype: c.dtype, window: c.window,
  });
  try {
    c.steps.forEach((step, i) => {
      const at = `step ${i} (${step.op})`;
      if (step.op === 'append') cache.append(toTensor(step.key), toTensor(step.value));
      else if (step.op === 'truncate') cache.truncate(step.length);
      else if (step.op === 'reset') cache.reset();
      else if (step.op === 'keys') {
        assertClose(cache.keys(), toTensor(step.keys), `${at} keys`, 0);
        assertClose(cache.values(), toTensor(step.values), `${at} values`, 0);
      } else if (step.op === 'attend') {
        assert.equal(cache.length, step.length, `${at} length`);
        assert.equal(cache.position, step.position, `${at} position`);
        const { output, weights } = cache.attend(toTensor(step.query), attendOptions(step.options));
        assertClose(output, toTensor(step.output), `${at} output`);
        if (step.weights === null) assert.equal(weights, null);
        else assertClose(weights, toTensor(step.weights), `${at} weights`);
      } else throw new Error(`fixture: unknown op ${step.op}`);
    });
  } finally {
    cache.dispose();
  }
}

function loadBlock(attn, c) {
  const k = c.config;
  const block = new attn.GroupedQueryAttention(k.hiddenSize, k.numHeads, k.numKeyValueHeads, {
    headDim: k.headDim, qkvBias: k.qkvBias, outputBias: k.outputBias, ropeBase: k.ropeBase, ropeInterleaved: k.ropeInterleaved,
    rotaryDim: k.rotaryDim, slidingWindow: k.slidingWindow, softcap: k.softcap, scale: k.scale,
  });
  block.loadStateDict(Object.fromEntries(Object.entries(c.stateDict).map(([name, t]) => [name, toTensor(t)])));
  return block;
}

function runBlockCase(attn, c) {
  const block = loadBlock(attn, c);
  const cache = c.cache && block.createCache(c.cache.maxLength, { batch: c.cache.batch, dtype: c.cache.dtype });
  try {
    c.steps.forEach((step, i) => {
      const at = `step ${i} (${step.op})`;
      if (step.op === 'truncate') {
        cache.truncate(step.length);
        return;
      }
      const opts = { needWeights: step.needWeights };
      if (cache) opts.cache = cache;
      if (step.positions !== null)
        opts.positions = step.positions.shape.length === 1 ? Int32Array.from(step.positions.data) : { shape: step.positions.shape, data: Int32Array.from(step.positions.data) };
      if (step.attnMask !== null) opts.attnMask = toMask(step.attnMask);
      if (step.headMask) opts.headMask = step.headMask;
      const { output, weights } = block.forward(toTensor(step.x), opts);
      assertClose(output, toTensor(step.output), `${at} output`, c.tolerance);
      if (step.weights === null) assert.equal(weights, null);
      else assertClose(weights, toTensor(step.weights), `${at} weights`, c.tolerance);
    });
  } finally {
    cache?.dispose();
    block.dispose();
  }
}

for (const build of BUILDS) {
  describe(`${build.name} build`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    describe('KVCache matches PyTorch (kv_cache.json)', () => {
      for (const c of cacheCases) test(c.name, () => runCacheCase(attn, c));
    });

    describe('GroupedQueryAttention matches PyTorch (gqa.json)', () => {
      for (const c of blockCases) test(c.name, () => runBlockCase(attn, c));
    });

    test('prefill then 32 decode steps through an f32 cache equal one full forward', () => {
      const random = rng(11);
      const block = new attn.GroupedQueryAttention(64, 8, 2, { ropeBase: 500000 });
      const sd = {};
      for (const [name, shape] of [['q_proj.weight', [64, 64]], ['k_proj.weight', [16, 64]], ['v_proj.weight', [16, 64]], ['o_proj.weight', [64, 64]]])
        sd[name] = randomTensor(shape, random);
      block.loadStateDict(sd);
      const x = randomTensor([1, 40, 64], random);
      const full = block.forward(x).output;
      const cache = block.createCache(64);
      const rows = (from, to) => ({ shape: [1, to - from, 64], data: x.data.slice(from * 64, to * 64) });
      const prefill = block.forward(rows(0, 8), { cache }).output;
      assert.ok(maxRelativeError(prefill.data, full.data.subarray(0, 8 * 64)) <= TOLERANCE);
      for (let t = 8; t < 40; t++) {
        const step = block.forward(rows(t, t + 1), { cache }).output;
        const err = maxRelativeError(step.data, full.data.subarray(t * 64, (t + 1) * 64));
        assert.ok(err <= TOLERANCE, `token ${t}: ${err}`);
      }
      assert.equal(cache.position, 40);
      cache.dispose();
      block.dispose();
    });

    test('a decode step equals SDPA over the held keys, for f32 and f16 caches (GQA 32 over 8, window, soft cap, ALiBi)', () => {
      const random = rng(12);
      for (const dtype of ['f32', 'f16']) {
        const cache = new attn.KVCache({ heads: 8, headDim: 64, maxLength: 700, dtype });
        cache.append(randomTensor([1, 8, 700, 64], random), randomTensor([1, 8, 700, 64], random));
        const keys = cache.keys(), values = cache.values();
        const q = randomTensor([1, 32, 1, 64], random);
        for (const opts of [{}, { window: 300, softcap: 5, alibi: true }, { isCausal: false, scale: 0.3 }]) {
          const step = cache.attend(q, opts).output;
          const sdpa = attn.scaledDotProductAttention(q, keys, values, {
            enableGqa: true, isCausal: opts.isCausal === false ? false : 'lowerRight', window: opts.window, softcap: opts.softcap, alibi: opts.alibi, scale: opts.scale,
          }).output;
          const err = maxRelativeError(step.data, sdpa.data);
          assert.ok(err <= 1e-6, `${dtype} ${JSON.stringify(opts)}: ${err}`);
        }
        cache.dispose();
      }
    });

    test('headMask with a cache, attentionMask, positions, out, a window and a soft cap: ones change nothing, the weights scale by it exactly', () => {
      const random = rng(31);
      const block = new attn.GroupedQueryAttention(16, 4, 2, { slidingWindow: 3, softcap: 5, outputBias: true });
      const bias = randomTensor([16], random);
      block.loadStateDict({
        'q_proj.weight': randomTensor([16, 16], random), 'k_proj.weight': randomTensor([8, 16], random),
        'v_proj.weight': randomTensor([8, 16], random), 'o_proj.weight': randomTensor([16, 16], random), 'o_proj.bias': bias,
      });
      const x = randomTensor([2, 4, 16], random), next = randomTensor([2, 1, 16], random);
      const attentionMask = { data: Uint8Array.of(0, 1, 1, 1, 1, 1, 1, 1), shape: [2, 4] };
      // A left-padded prefill, then a decode step at given positions into arrays reused: weights
      // [2, 4, 4, 4] and [2, 4, 1, 5].
      const run = (headMask) => {
        const cache = block.createCache(8, { batch: 2 });
        const results = [
          block.forward(x, { cache, attentionMask, headMask, needWeights: true }),
          block.forward(next, {
            cache, positions: { data: Int32Array.of(3, 4), shape: [2, 1] }, headMask, needWeights: true,
            out: { output: new Float32Array(32), weights: new Float32Array(40) },
          }),
        ];
        cache.dispose();
        return results;
      };
      const plain = run(undefined), ones = run([1, 1, 1, 1]), zeros = run(new Float32Array(4));
      const mask = [1, 0, 0.3, 1], masked = run(mask);
      plain.forEach(({ output, weights }, i) => {
        assert.ok(bitIdentical(ones[i].output.data, output.data) && bitIdentical(ones[i].weights.data, weights.data), `call ${i}: ones`);
        const plane = weights.data.length / 8;
        weights.data.forEach((w, j) => assert.equal(masked[i].weights.data[j], Math.fround(w * Math.fround(mask[Math.floor(j / plane) % 4])), `call ${i}: weight ${j}`));
        // Every head removed: o_proj's input is zero, its output the bias.
        zeros[i].output.data.forEach((y, j) => assert.equal(y, bias.data[j % 16], `call ${i}: zeros`));
      });
      block.dispose();
    });

    // KVCache.attend, GroupedQueryAttention.forward and scaledDotProductAttention take the same
    // `out`: arrays the caller reuses, the results written at their start.
    test('{ out } writes the output and weights into the arrays given: attend, GroupedQueryAttention.forward, scaledDotProductAttention', () => {
      const cache = new attn.KVCache({ heads: 2, headDim: 4, maxLength: 16 });
      cache.append(randomTensor([1, 2, 6, 4], rng(11)), randomTensor([1, 2, 6, 4], rng(12)));
      const block = new attn.GroupedQueryAttention(8, 2, 2).loadStateDict(Object.fromEntries(
        ['q_proj', 'k_proj', 'v_proj', 'o_proj'].map((name, i) => [`${name}.weight`, randomTensor([8, 8], rng(20 + i))])));
      const [key, value] = [randomTensor([1, 2, 6, 4], rng(16)), randomTensor([1, 2, 6, 4], rng(17))];
      const calls = [
        ['KVCache.attend', (seed, opts) => cache.attend(randomTensor([1, 2, 3, 4], rng(seed)), opts), [1, 2, 3, 4], [1, 2, 3, 6]],
        ['GroupedQueryAttention.forward', (seed, opts) => block.forward(randomTensor([1, 3, 8], rng(seed)), opts), [1, 3, 8], [1, 2, 3, 3]],
        ['scaledDotProductAttention', (seed, opts) => attn.scaledDotProductAttention(randomTensor([1, 2, 3, 4], rng(seed)), key, value, opts), [1, 2, 3, 4], [1, 2, 3, 6]],
      ];
      for (const [name, call, outputShape, weightsShape] of calls) {
        const size = (shape) => shape.reduce((a, b) => a * b, 1);
        const output = new Float32Array(size(outputShape));
        const weights = new Float32Array(100).fill(-1);
        for (const seed of [13, 14]) {
          const fresh = call(seed, { needWeights: true });
          const into = call(seed, { needWeights: true, out: { output, weights } });
          assert.equal(into.output.data, output, name);
          assert.equal(into.weights.data.buffer, weights.buffer, name);
          assert.deepEqual(into.output.data, fresh.output.data, name);
          assert.deepEqual(into.weights.data, fresh.weights.data, name);
          assert.deepEqual(into.weights.shape, weightsShape, name);
        }
        assert.equal(weights[size(weightsShape)], -1, `${name}: past the weights, the array is untouched`);
        const named = (opts, argument, part) => assert.throws(() => call(15, opts),
          (err) => err instanceof AttentionError && err.argument === argument && err.message.includes(part), `${name}: ${argument}`);
        named({ needWeights: true, out: { weights: new Float32Array(size(weightsShape) - 1) } }, 'out.weights',
          `at least ${size(weightsShape)} elements (the result [${weightsShape.join(', ')}])`);
        named({ out: { weights } }, 'out.weights', 'needWeights: true');
        named({ out: { output: new Float64Array(24) } }, 'out.output', 'a Float32Array');
        named({ out: new Float32Array(24) }, 'out', 'an options object');
        named({ needWeights: true, out: { weight: weights } }, 'out.weight', 'one of the options output, weights');
        assert.equal(call(15, { out: { output, weights: null } }).weights, null, `${name}: weights: null is none`);
        // The instance keeps working, and its memory stays where it was.
        const heap = attn.stats().wasmHeapBytes;
        for (let i = 0; i < 10; i++) call(i, { needWeights: true, out: { output, weights } });
        assert.equal(attn.stats().wasmHeapBytes, heap, name);
      }
      cache.dispose();
      block.dispose();
    });

    test('caches count as live objects until disposed, and a disposed cache throws DISPOSED', () => {
      const before = attn.stats().liveObjects;
      const cache = new attn.KVCache({ heads: 2, headDim: 4, maxLength: 8 });
      assert.equal(attn.stats().liveObjects, before + 1);
      cache.dispose();
      cache.dispose();
      assert.equal(attn.stats().liveObjects, before);
      assert.throws(() => cache.attend(randomTensor([1, 2, 1, 4], rng(1))), (err) => err instanceof AttentionError && err.code === 'DISPOSED');
      const block = new attn.GroupedQueryAttention(8, 2, 1);
      assert.throws(() => block.forward(randomTensor([1, 1, 8], rng(1)), { cache }), (err) => err instanceof AttentionError && err.code === 'DISPOSED');
      block.dispose();
    });
  });
}
