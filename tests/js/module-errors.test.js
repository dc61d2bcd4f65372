// Bad input to the modules: constructors, loadStateDict and forward each throw an AttentionError
// that names the argument (and both shapes, where shapes are involved); a failed call changes
// nothing, neither the module nor the instance, and repeated failures never grow wasm memory.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import {
  MODULE_KINDS,
  assertAttentionError,
  bitIdentical,
  fixture,
  fixtureOptions,
  loadedModule,
  moduleFixture,
  tensorOf,
} from './helpers.js';

const t = (shape) => tensorOf(shape);

// The fixture case each kind's known-good result comes from.
const GOOD_CASES = {
  MultiheadAttention: moduleFixture('mha', 'no_mask'), // query [5, 2, 8], E 8, 2 heads
  SelfAttention: moduleFixture('self_attention', 'no_mask'), // x [2, 5, 8]
  AdditiveAttention: moduleFixture('additive_attention', 'no_mask'), // query [2, 3, 6], key [2, 5, 6]
  RelativeMultiHeadAttention: moduleFixture('relative_attention', 'square_no_mask'), // [5, 2, 8], P 16
};

let attn;
before(async () => {
  attn = await init();
});

describe('constructor arguments', () => {
  // [class, valid arguments, index of each size argument by name]
  const CONSTRUCTORS = [
    ['MultiheadAttention', [8, 2], { embedDim: 0, numHeads: 1 }],
    ['SelfAttention', [8, 4, 6], { embedDim: 0, keySize: 1, valueSize: 2 }],
    ['AdditiveAttention', [6, 5, 4], { querySize: 0, keySize: 1, hiddenSize: 2 }],
    ['RelativeMultiHeadAttention', [2, 8], { heads: 0, dModel: 1 }],
  ];
  const BAD_SIZES = [0, -1, 1.5, NaN, '8', Infinity, null, undefined, 2 ** 31, 8n, [8]];
  const show = (v) => (typeof v === 'bigint' ? `${v}n` : typeof v === 'string' ? `'${v}'` : Array.isArray(v) ? `[${v}]` : String(v));

  for (const [name, valid, positions] of CONSTRUCTORS) {
    describe(name, () => {
      test('valid arguments construct', () => {
        new attn[name](...valid).dispose();
      });
      for (const [argument, index] of Object.entries(positions)) {
        for (const bad of BAD_SIZES) {
          test(`${argument} = ${show(bad)}`, () => {
            const args = [...valid];
            args[index] = bad;
            assertAttentionError(() => new attn[name](...args), AttentionError, argument);
          });
        }
      }
      for (const bad of [1, -0.1, 1.5, NaN, '0.1', Infinity]) {
        test(`dropout = ${show(bad)}`, () => {
          assertAttentionError(() => new attn[name](...valid, { dropout: bad }), AttentionError, 'dropout');
        });
      }
      test('an unknown option', () => {
        assertAttentionError(() => new attn[name](...valid, { dropuot: 0.1 }), AttentionError, 'dropuot');
      });
      test('options that are not an object', () => {
        assertAttentionError(() => new attn[name](...valid, 5), AttentionError, /opts|options/);
      });
    });
  }

  test('MultiheadAttention: kdim, vdim and boolean options are checked', () => {
    for (const bad of [0, -1, 1.5, NaN, '8']) {
      assertAttentionError(() => new attn.MultiheadAttention(8, 2, { kdim: bad }), AttentionError, 'kdim');
      assertAttentionError(() => new attn.MultiheadAttention(8, 2, { vdim: bad }), AttentionError, 'vdim');
    }
    for (const option of ['bias', 'addBiasKV', 'addZeroAttn', 'batchFirst'])
      assertAttentionError(() => new attn.MultiheadAttention(8, 2, { [option]: 1 }), AttentionError, option);
    assertAttentionError(() => new attn.MultiheadAttention(8, 2, { batch_first: true }), AttentionError, 'batch_first');
  });

  test('RelativeMultiHeadAttention: P is a positive integer', () => {
    for (const bad of [0, -1, 1.5, NaN, '16']) assertAttentionError(() => new attn.RelativeMultiHeadAttention(2, 8, { P: bad }), AttentionError, 'P');
  });

  test('embedDim not divisible by numHeads, dModel not divisible by heads', () => {
    assertAttentionError(() => new attn.MultiheadAttention(8, 3), AttentionError, /^(embedDim|numHeads)$/, [/embedDim/, /numHeads/, '8', '3']);
    assertAttentionError(() => new attn.MultiheadAttention(10, 4, { kdim: 3 }), AttentionError, /^(embedDim|numHeads)$/, ['10', '4']);
    assertAttentionError(() => new attn.RelativeMultiHeadAttention(3, 8), AttentionError, /^(dModel|heads)$/, [/dModel/, /heads/, '8', '3']);
  });

  test('failed constructions leave no live module behind', () => {
    assert.equal(attn.stats().liveObjects, 0);
  });
});

// A forward call with inputs that fit the module, whatever its configuration.
function validForward(module) {
  switch (module.constructor.name) {
    case 'MultiheadAttention':
      return module.forward(t([3, 2, module.embedDim]), t([4, 2, module.kdim]), t([4, 2, module.vdim]));
    case 'SelfAttention':
      return module.forward(t([2, 3, module.embedDim]));
    case 'AdditiveAttention':
      return module.forward(t([2, 3, module.querySize]), t([2, 4, module.keySize]), t([2, 4, 5]));
    case 'RelativeMultiHeadAttention':
      return module.forward(t([3, 2, module.dModel]), t([4, 2, module.dModel]), t([4, 2, module.dModel]));
    default:
      throw new Error(`unknown module ${module.constructor.name}`);
  }
}

describe('loadStateDict', () => {
  const mhaCase = GOOD_CASES.MultiheadAttention;
  const sd = mhaCase.stateDict;
  const without = (dict, name) => Object.fromEntries(Object.entries(dict).filter(([key]) => key !== name));

  // [description, module constructor, state dict, argument, message parts]
  const BAD_LOADS = [
    ['a missing entry', (a) => new a.MultiheadAttention(8, 2), without(sd, 'out_proj.bias'), "stateDict['out_proj.bias']", ['[8]']],
    ['a missing in_proj_weight', (a) => new a.MultiheadAttention(8, 2), without(sd, 'in_proj_weight'), "stateDict['in_proj_weight']", ['[24, 8]']],
    ['an extra entry', (a) => new a.MultiheadAttention(8, 2), { ...sd, 'out_proj.extra': t([8]) }, "stateDict['out_proj.extra']", []],
    ['bias_k without addBiasKV', (a) => new a.MultiheadAttention(8, 2), { ...sd, bias_k: t([1, 1, 8]) }, "stateDict['bias_k']", []],
    ['a mis-shaped bias', (a) => new a.MultiheadAttention(8, 2), { ...sd, 'out_proj.bias': t([9]) }, "stateDict['out_proj.bias']", ['[9]', '[8]']],
    ['a transposed weight', (a) => new a.MultiheadAttention(8, 2), { ...sd, in_proj_weight: t([8, 24]) }, "stateDict['in_proj_weight']", ['[8, 24]', '[24, 8]']],
    ['a rank-1 weight', (a) => new a.MultiheadAttention(8, 2), { ...sd, 'out_proj.weight': t([64]) }, "stateDict['out_proj.weight']", ['[64]', '[8, 8]']],
    [
      'a Float64Array entry',
      (a) => new a.MultiheadAttention(8, 2),
      { ...sd, 'out_proj.weight': { shape: [8, 8], data: new Float64Array(64) } },
      /^stateDict\['out_proj\.weight'\]/,
      ['Float64Array', 'Float32Array'],
    ],
    [
      'an entry whose data length does not match its shape',
      (a) => new a.MultiheadAttention(8, 2),
      { ...sd, 'out_proj.bias': { shape: [8], data: new Float32Array(7) } },
      /^stateDict\['out_proj\.bias'\]/,
      ['7', '8'],
    ],
    ['an entry that is a bare Float32Array', (a) => new a.MultiheadAttention(8, 2), { ...sd, 'out_proj.bias': new Float32Array(8) }, /^stateDict\['out_proj\.bias'\]/, []],
    ['an entry that is null', (a) => new a.MultiheadAttention(8, 2), { ...sd, 'out_proj.bias': null }, /^stateDict\['out_proj\.bias'\]/, []],
    ['no bias: in_proj_bias given', (a) => new a.MultiheadAttention(8, 2, { bias: false }), without(sd, 'out_proj.bias'), "stateDict['in_proj_bias']", []],
    ['addBiasKV: bias_k missing', (a) => new a.MultiheadAttention(8, 2, { addBiasKV: true }), { ...sd, bias_v: t([1, 1, 8]) }, "stateDict['bias_k']", ['[1, 1, 8]']],
    [
      'addBiasKV: bias_k mis-shaped',
      (a) => new a.MultiheadAttention(8, 2, { addBiasKV: true }),
      { ...sd, bias_k: t([8]), bias_v: t([1, 1, 8]) },
      "stateDict['bias_k']",
      ['[8]', '[1, 1, 8]'],
    ],
    [
      'kdim != embedDim: in_proj_weight instead of separate weights',
      (a) => new a.MultiheadAttention(8, 2, { kdim: 5 }),
      sd,
      /^stateDict\['(in_proj_weight|q_proj_weight|k_proj_weight|v_proj_weight)'\]$/,
      [],
    ],
    [
      'kdim != embedDim: k_proj_weight mis-shaped',
      (a) => new a.MultiheadAttention(8, 2, { kdim: 5 }),
      { ...without(sd, 'in_proj_weight'), q_proj_weight: t([8, 8]), k_proj_weight: t([8, 8]), v_proj_weight: t([8, 8]) },
      "stateDict['k_proj_weight']",
      ['[8, 8]', '[8, 5]'],
    ],
    [
      'SelfAttention: a missing W_v.weight',
      (a) => new a.SelfAttention(8, 4, 6),
      { 'W_q.weight': t([4, 8]), 'W_k.weight': t([4, 8]) },
      "stateDict['W_v.weight']",
      ['[6, 8]'],
    ],
    [
      'SelfAttention: a mis-shaped W_q.weight',
      (a) => new a.SelfAttention(8, 4, 6),
      { 'W_q.weight': t([8, 4]), 'W_k.weight': t([4, 8]), 'W_v.weight': t([6, 8]) },
      "stateDict['W_q.weight']",
      ['[8, 4]', '[4, 8]'],
    ],
    [
      'AdditiveAttention: W_v.weight as a vector',
      (a) => new a.AdditiveAttention(6, 5, 4),
      { 'W_q.weight': t([4, 6]), 'W_k.weight': t([4, 5]), 'W_v.weight': t([4]) },
      "stateDict['W_v.weight']",
      ['[4]', '[1, 4]'],
    ],
    [
      'RelativeMultiHeadAttention: key_pos_embeddings for another P',
      (a) => new a.RelativeMultiHeadAttention(2, 8, { P: 16 }),
      { ...GOOD_CASES.RelativeMultiHeadAttention.stateDict, key_pos_embeddings: t([30, 2, 4]) },
      "stateDict['key_pos_embeddings']",
      ['[30, 2, 4]', '[32, 2, 4]'],
    ],
    [
      'RelativeMultiHeadAttention: a bias the query projection does not have',
      (a) => new a.RelativeMultiHeadAttention(2, 8, { P: 16 }),
      { ...GOOD_CASES.RelativeMultiHeadAttention.stateDict, 'query.linear.bias': t([8]) },
      "stateDict['query.linear.bias']",
      [],
    ],
  ];

  for (const [what, make, dict, argument, message] of BAD_LOADS) {
    test(what, () => {
      const module = make(attn);
      try {
        assertAttentionError(() => module.loadStateDict(dict), AttentionError, argument, message);
        // A module whose only load failed still has no weights.
        assert.throws(() => validForward(module), /loadStateDict/);
      } finally {
        module.dispose();
      }
    });
  }

  test('a state dict that is not an object', () => {
    const module = new attn.MultiheadAttention(8, 2);
    try {
      for (const bad of [null, undefined, 5, 'weights', [sd], () => sd])
        assertAttentionError(() => module.loadStateDict(bad), AttentionError, 'stateDict');
      // A typed array is an object whose keys are indices: refused through its first "entry".
      assertAttentionError(() => module.loadStateDict(new Float32Array(8)), AttentionError, /^stateDict/);
    } finally {
      module.dispose();
    }
  });

  for (const [kind, c] of Object.entries(GOOD_CASES)) {
    test(`${kind}: a failed load leaves the loaded weights working bit-identically`, () => {
      const { forward } = MODULE_KINDS[kind];
      const module = loadedModule(attn, kind, c);
      try {
        const good = forward(module, c);
        // Every valid entry of the failing dicts holds different weights, so a partial load would show.
        const names = Object.keys(c.stateDict);
        const changed = Object.fromEntries(names.map((name) => [name, { shape: c.stateDict[name].shape, data: c.stateDict[name].data.map((x) => x * 2 + 0.5) }]));
        const probe = loadedModule(attn, kind, c);
        try {
          probe.loadStateDict(changed);
          assert.ok(!bitIdentical(forward(probe, c).output.data, good.output.data), 'the changed weights change the result');
        } finally {
          probe.dispose();
        }
        const last = names.at(-1);
        const bad = {
          'mis-shaped': { ...changed, [last]: t([...c.stateDict[last].shape, 2]) },
          missing: Object.fromEntries(Object.entries(changed).slice(1)),
          extra: { ...changed, 'not.a.parameter': t([1]) },
          Float64Array: { ...changed, [last]: { shape: c.stateDict[last].shape, data: Float64Array.from(c.stateDict[last].data) } },
        };
        for (const [how, dict] of Object.entries(bad)) {
          assert.throws(() => module.loadStateDict(dict), AttentionError, how);
          const again = forward(module, c);
          assert.ok(bitIdentical(again.output.data, good.output.data), `output unchanged after a ${how} load`);
          assert.ok(bitIdentical(again.weights.data, good.weights.data), `weights unchanged after a ${how} load`);
        }
      } finally {
        module.dispose();
      }
    });
  }
});

describe('forward shapes and options', () => {
  const modules = {};
  const goods = {};
  const sdpaCase = fixture('batch_heads_no_mask');
  let sdpaGood;

  before(() => {
    for (const [kind, c] of Object.entries(GOOD_CASES)) {
      modules[kind] = loadedModule(attn, kind, c);
      goods[kind] = MODULE_KINDS[kind].forward(modules[kind], c);
    }
    sdpaGood = attn.scaledDotProductAttention(sdpaCase.query, sdpaCase.key, sdpaCase.value, fixtureOptions(sdpaCase, { needWeights: true }));
  });

  const u8 = (shape) => ({ shape, data: new Uint8Array(shape.reduce((a, b) => a * b, 1)) });
  const mha = (q, k, v, opts) => (m) => m.forward(q, k, v, opts);
  const q = t([5, 2, 8]);

  // [kind, description, call(module), argument, message parts]
  const BAD_FORWARDS = [
    ['MultiheadAttention', 'query last dim != embedDim', mha(t([5, 2, 7]), q, q), 'query', ['[5, 2, 7]', /2, 8\]/]],
    ['MultiheadAttention', 'query of rank 1', mha(t([8]), q, q), 'query', ['[8]']],
    ['MultiheadAttention', 'query of rank 4', mha(t([1, 5, 2, 8]), q, q), 'query', ['[1, 5, 2, 8]']],
    ['MultiheadAttention', 'key batch != query batch', mha(q, t([5, 3, 8]), t([5, 3, 8])), 'key', ['[5, 3, 8]', /2, 8\]/]],
    ['MultiheadAttention', 'key last dim != kdim', mha(q, t([5, 2, 6]), q), 'key', ['[5, 2, 6]', /2, 8\]/]],
    ['MultiheadAttention', 'value length != key length', mha(q, q, t([4, 2, 8])), 'value', ['[4, 2, 8]', '[5, 2, 8]']],
    ['MultiheadAttention', 'value batch != key batch', mha(q, q, t([5, 3, 8])), 'value', ['[5, 3, 8]', '[5, 2, 8]']],
    ['MultiheadAttention', 'unbatched query with batched key', mha(t([5, 8]), q, q), /^(query|key)$/, ['[5, 2, 8]']],
    ['MultiheadAttention', 'keyPaddingMask [N, m] with the wrong m', mha(q, q, q, { keyPaddingMask: u8([2, 4]) }), 'keyPaddingMask', ['[2, 4]', '[2, 5]']],
    ['MultiheadAttention', 'keyPaddingMask [N, m] with the wrong N', mha(q, q, q, { keyPaddingMask: u8([3, 5]) }), 'keyPaddingMask', ['[3, 5]', '[2, 5]']],
    ['MultiheadAttention', 'keyPaddingMask of rank 3', mha(q, q, q, { keyPaddingMask: u8([2, 5, 1]) }), 'keyPaddingMask', ['[2, 5, 1]', '[2, 5]']],
    ['MultiheadAttention', 'attnMask [n, m] with the wrong m', mha(q, q, q, { attnMask: u8([5, 4]) }), 'attnMask', ['[5, 4]', '[5, 5]']],
    ['MultiheadAttention', 'attnMask 3-D without N*numHeads', mha(q, q, q, { attnMask: u8([2, 5, 5]) }), 'attnMask', ['[2, 5, 5]', '[4, 5, 5]']],
    ['MultiheadAttention', 'attnMask of rank 4', mha(q, q, q, { attnMask: u8([1, 4, 5, 5]) }), 'attnMask', ['[1, 4, 5, 5]']],
    ['MultiheadAttention', 'attnMask as Int32Array', mha(q, q, q, { attnMask: { shape: [5, 5], data: new Int32Array(25) } }), /^attnMask/, ['Int32Array']],
    ['MultiheadAttention', 'query as Float64Array', mha({ shape: [5, 2, 8], data: new Float64Array(80) }, q, q), /^query/, ['Float64Array']],
    ['MultiheadAttention', 'query data shorter than its shape', mha({ shape: [5, 2, 8], data: new Float32Array(79) }, q, q), /^query/, ['79', '80']],
    ['MultiheadAttention', 'needWeights not a boolean', mha(q, q, q, { needWeights: 1 }), 'needWeights', []],
    ['MultiheadAttention', 'a misspelt option', mha(q, q, q, { keyPadingMask: u8([2, 5]) }), 'keyPadingMask', []],
    ['MultiheadAttention', 'a negative seed', mha(q, q, q, { seed: -1 }), 'seed', []],
    // Options where key goes (forward(x, { ... })): named as such, with where they go.
    [
      'MultiheadAttention', 'the options where key goes', (m) => m.forward(q, { needWeights: false, isCausal: true }), 'key',
      ['options go last', 'forward(query, key, value, opts), key and value null for the query itself', 'got the options { needWeights, isCausal }'],
    ],
    ['MultiheadAttention', 'the options where value goes', mha(q, null, { attnMask: null }), 'value', ['options go last', 'got the options { attnMask }']],
    ['MultiheadAttention', 'a tensor without data where key goes', mha(q, { shape: [5, 2, 8] }), 'key.data', ['a Float32Array', 'got undefined']],
    ['SelfAttention', 'x last dim != embedDim', (m) => m.forward(t([2, 5, 7])), 'x', ['[2, 5, 7]', /8\]/]],
    ['SelfAttention', 'x of rank 4', (m) => m.forward(t([1, 2, 5, 8])), 'x', ['[1, 2, 5, 8]']],
    ['SelfAttention', 'attnMask that does not broadcast', (m) => m.forward(t([2, 5, 8]), { attnMask: u8([5, 4]) }), 'attnMask', ['[5, 4]', '[2, 5, 5]']],
    ['SelfAttention', 'attnMask with a larger batch', (m) => m.forward(t([2, 5, 8]), { attnMask: u8([3, 5, 5]) }), 'attnMask', ['[3, 5, 5]', '[2, 5, 5]']],
    ['AdditiveAttention', 'query last dim != querySize', (m) => m.forward(t([2, 3, 7]), t([2, 5, 6]), t([2, 5, 6])), 'query', ['[2, 3, 7]', /6\]/]],
    ['AdditiveAttention', 'key batch != query batch', (m) => m.forward(t([2, 3, 6]), t([3, 5, 6]), t([3, 5, 6])), 'key', ['[3, 5, 6]', /\[2, /]],
    ['AdditiveAttention', 'key last dim != keySize', (m) => m.forward(t([2, 3, 6]), t([2, 5, 4]), t([2, 5, 6])), 'key', ['[2, 5, 4]', /6\]/]],
    ['AdditiveAttention', 'value length != key length', (m) => m.forward(t([2, 3, 6]), t([2, 5, 6]), t([2, 4, 6])), 'value', ['[2, 4, 6]', /\[2, 5/]],
    ['AdditiveAttention', 'the options where key goes', (m) => m.forward(t([2, 3, 6]), { attnMask: null }), 'key', ['options go last', 'got the options { attnMask }']],
    ['AdditiveAttention', 'attnMask that does not broadcast', (m) => m.forward(t([2, 3, 6]), t([2, 5, 6]), t([2, 5, 6]), { attnMask: u8([2, 3, 4]) }), 'attnMask', ['[2, 3, 4]', '[2, 3, 5]']],
    ['RelativeMultiHeadAttention', 'n > P', (m) => m.forward(t([17, 2, 8]), t([16, 2, 8]), t([16, 2, 8])), 'query', ['[17, 2, 8]', '16']],
    ['RelativeMultiHeadAttention', 'm > P', (m) => m.forward(t([5, 2, 8]), t([17, 2, 8]), t([17, 2, 8])), 'key', ['[17, 2, 8]', '16']],
    ['RelativeMultiHeadAttention', 'query last dim != dModel', (m) => m.forward(t([5, 2, 7]), t([5, 2, 8]), t([5, 2, 8])), 'query', ['[5, 2, 7]', /8\]/]],
    ['RelativeMultiHeadAttention', 'key batch != query batch', (m) => m.forward(t([5, 2, 8]), t([5, 3, 8]), t([5, 3, 8])), 'key', ['[5, 3, 8]', /2, 8\]/]],
    ['RelativeMultiHeadAttention', 'value length != key length', (m) => m.forward(t([5, 2, 8]), t([5, 2, 8]), t([4, 2, 8])), 'value', ['[4, 2, 8]', '[5, 2, 8]']],
    ['RelativeMultiHeadAttention', 'mask with the wrong m', (m) => m.forward(q, q, q, { mask: u8([5, 4, 2]) }), 'mask', ['[5, 4, 2]', /5, 2/]],
    ['RelativeMultiHeadAttention', 'mask with the wrong batch', (m) => m.forward(q, q, q, { mask: u8([5, 5, 3]) }), 'mask', ['[5, 5, 3]']],
    ['RelativeMultiHeadAttention', 'mask of rank 2', (m) => m.forward(q, q, q, { mask: u8([5, 5]) }), 'mask', ['[5, 5]']],
    ['RelativeMultiHeadAttention', 'an empty object where value goes', (m) => m.forward(q, q, {}), 'value', ['options go last', 'got an empty object']],
    ['RelativeMultiHeadAttention', 'an unknown weightsLayout', (m) => m.forward(q, q, q, { weightsLayout: 'BNHnm' }), 'weightsLayout', ['"nmBH", "BHnm"', '"BNHnm"']],
  ];

  function assertStillGood(kind) {
    const again = MODULE_KINDS[kind].forward(modules[kind], GOOD_CASES[kind]);
    assert.ok(bitIdentical(again.output.data, goods[kind].output.data), `${kind} output unchanged`);
    assert.ok(bitIdentical(again.weights.data, goods[kind].weights.data), `${kind} weights unchanged`);
    const sdpa = attn.scaledDotProductAttention(sdpaCase.query, sdpaCase.key, sdpaCase.value, fixtureOptions(sdpaCase, { needWeights: true }));
    assert.ok(bitIdentical(sdpa.output.data, sdpaGood.output.data), 'the instance still computes SDPA as before');
  }

  for (const [kind, what, call, argument, message] of BAD_FORWARDS) {
    test(`${kind}: ${what}`, () => {
      assertAttentionError(() => call(modules[kind]), AttentionError, argument, message);
      assertStillGood(kind);
    });
  }

  test('2,000 failing forward calls keep wasmHeapBytes flat', () => {
    // Includes a module without weights given large inputs (2.6 MB per call), which a leak of
    // its input copies would show at once.
    const unloaded = new attn.MultiheadAttention(64, 4);
    const big = t([256, 4, 64]);
    const calls = [...BAD_FORWARDS.map(([kind, , call]) => () => call(modules[kind])), () => unloaded.forward(big, big, big)];
    try {
      for (const call of calls) assert.throws(call, AttentionError); // warm-up
      const heap = attn.stats().wasmHeapBytes;
      for (let i = 0; i < 2000; i++) assert.throws(calls[i % calls.length], AttentionError);
      assert.equal(attn.stats().wasmHeapBytes, heap);
      for (const kind of Object.keys(GOOD_CASES)) assertStillGood(kind);
    } finally {
      unloaded.dispose();
    }
  });
});
