// A seeded, randomized stress test through the public API: good calls of every kind (the fixture
// cases) mixed with 100,000 bad ones built by breaking one argument at random. Every bad call must
// throw an AttentionError, the heap must stay flat after warm-up, and the instance must still give
// bit-identical results at the end.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { bitIdentical, fixtureOptions, loadFixtures, loadedModule, loadModuleFixtures, MODULE_KINDS, rng } from './helpers.js';

const BAD_CALLS = 100_000;
const GOOD_EVERY = 20; // one good call per 20 bad ones

// One callable per fixture case: `args` are the tensors, `opts` the options, `mismatch` the index
// of an argument whose last dimension must agree with another's (so changing it is always an error).
function goodCalls(attn) {
  const calls = loadFixtures().map((c) => ({
    name: `sdpa ${c.name}`,
    args: [c.query, c.key, c.value],
    opts: fixtureOptions(c, { needWeights: true }),
    mismatch: 1, // key's d must equal query's d
    run: (args, opts) => attn.scaledDotProductAttention(...args, opts),
  }));
  const modules = [];
  for (const [kind, { file, forward }] of Object.entries(MODULE_KINDS)) {
    for (const c of loadModuleFixtures(file)) {
      const module = loadedModule(attn, kind, c);
      modules.push(module);
      const tensors = kind === 'SelfAttention' ? [c.x] : [c.query, c.key, c.value];
      calls.push({
        name: `${kind} ${c.name}`,
        args: tensors,
        opts: {},
        mismatch: 0, // the first input's feature size is fixed by the module
        run: (args, opts) => {
          const fixtureWithArgs = kind === 'SelfAttention' ? { ...c, x: args[0] } : { ...c, query: args[0], key: args[1], value: args[2] };
          return forward(module, fixtureWithArgs, opts);
        },
      });
    }
  }
  return { calls, modules };
}

const BAD_DATA = [
  (t) => ({ ...t, data: Float64Array.from(t.data) }),
  (t) => ({ ...t, data: Int32Array.from(t.data) }),
  (t) => ({ ...t, data: Array.from(t.data) }),
  (t) => ({ ...t, data: null }),
  (t) => ({ ...t, data: undefined }),
  (t) => ({ ...t, data: new Float32Array(t.data.length + 1) }),
];
const BAD_SHAPE_ENTRIES = [-1, 1.5, NaN, Infinity, '2', 2 ** 40, null];
const BAD_OPTIONS = [
  { scale: NaN }, { scale: Infinity }, { scale: '1' }, { dropoutP: -0.1 }, { dropoutP: 1 }, { dropoutP: 2 },
  { seed: -1 }, { seed: 1.5 }, { needWeights: 'yes' }, { isCausal: 1 }, { attnMask: 'none' }, { attnMask: [1, 0] },
  { attnMask: { data: new Int32Array(4), shape: [2, 2] } }, { notAnOption: true },
];

// Breaks one thing about a good call, always into an invalid one.
function breakCall(call, random) {
  const pick = (list) => list[Math.floor(random() * list.length)];
  const args = [...call.args];
  const which = Math.floor(random() * args.length);
  switch (Math.floor(random() * 5)) {
    case 0:
      args[which] = pick(BAD_DATA)(args[which]);
      return { args, opts: call.opts };
    case 1: {
      const shape = [...args[which].shape];
      shape[Math.floor(random() * shape.length)] = pick(BAD_SHAPE_ENTRIES);
      args[which] = { ...args[which], shape };
      return { args, opts: call.opts };
    }
    case 2: {
      const t = args[call.mismatch];
      const shape = [...t.shape];
      shape[shape.length - 1] += 1 + Math.floor(random() * 3);
      args[call.mismatch] = { shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)) };
      return { args, opts: call.opts };
    }
    case 3: {
      // MultiheadAttention's key and value default to the query when null: only the first
      // argument can be broken that way.
      const notTensors = [42, 'tensor', new Float32Array(4), { shape: [2] }];
      args[which] = pick(which === 0 ? [null, undefined, ...notTensors] : notTensors);
      return { args, opts: call.opts };
    }
    default: {
      const bad = pick(BAD_OPTIONS);
      // Options a module does not take are unknown options: still an error.
      return { args, opts: { ...call.opts, ...bad } };
    }
  }
}

test('100,000 random bad calls among good ones: each throws AttentionError, the heap stays flat', async () => {
  const attn = await init();
  const random = rng(20261122);
  const liveBefore = attn.stats().liveObjects;
  const { calls, modules } = goodCalls(attn);
  // Warm-up: every good call once, so the heap reaches its working size.
  const expected = calls.map((call) => call.run(call.args, call.opts));
  const heap = attn.stats().wasmHeapBytes;

  let good = 0;
  for (let i = 0; i < BAD_CALLS; i++) {
    const call = calls[Math.floor(random() * calls.length)];
    const { args, opts } = breakCall(call, random);
    assert.throws(
      () => call.run(args, opts),
      (error) => error instanceof AttentionError && typeof error.argument === 'string' && error.argument.length > 0,
      `bad call ${i} on ${call.name} did not throw an AttentionError`,
    );
    if (i % GOOD_EVERY === 0) {
      const index = Math.floor(random() * calls.length);
      const result = calls[index].run(calls[index].args, calls[index].opts);
      assert.ok(bitIdentical(result.output.data, expected[index].output.data), `${calls[index].name} changed`);
      good++;
    }
  }
  assert.equal(attn.stats().wasmHeapBytes, heap, 'the heap grew');
  calls.forEach((call, i) => {
    const result = call.run(call.args, call.opts);
    assert.ok(bitIdentical(result.output.data, expected[i].output.data), `${call.name} changed`);
    if (result.weights) assert.ok(bitIdentical(result.weights.data, expected[i].weights.data), `${call.name} weights changed`);
  });
  modules.forEach((module) => module.dispose());
  assert.equal(attn.stats().liveObjects, liveBefore, 'every module was disposed');
  assert.ok(good >= BAD_CALLS / GOOD_EVERY);
});
