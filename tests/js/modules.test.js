// The attention modules against the PyTorch fixtures on every build, plus what the fixtures cannot
// show: thread-count independence, default key/value, unbatched input, fully masked rows, float
// masks for relative attention, read-only constructor arguments, train/eval and dropout.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { init } from 'attention-wasm';

import {
  BUILDS,
  MODULE_KINDS,
  assertClose,
  bitIdentical,
  loadModuleFixtures,
  loadedModule,
  maxRelativeError,
  moduleFixture,
  randomTensor,
  rng,
} from './helpers.js';

// Runs `fn(module)` on a loaded module for case `c` and disposes it whatever happens.
function withModule(attn, kind, c, fn, opts) {
  const module = loadedModule(attn, kind, c, opts);
  try {
    return fn(module);
  } finally {
    module.dispose();
  }
}

for (const build of BUILDS) {
  describe(`${build.name} build`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
      assert.equal(attn.features.simd, build.simd);
      assert.equal(attn.features.threads, build.threads);
    });
    after(() => assert.equal(attn.stats().liveObjects, 0, 'every module of this suite was disposed'));

    for (const [kind, { file, forward }] of Object.entries(MODULE_KINDS)) {
      describe(`${kind} fixtures`, () => {
        for (const c of loadModuleFixtures(file)) {
          test(c.name, () =>
            withModule(attn, kind, c, (module) => {
              const result = forward(module, c);
              assertClose(result.output, c.output, 'output');
              if (c.weights === null || c.weights === undefined) assert.equal(result.weights, null);
              else assertClose(result.weights, c.weights, 'weights');
              if (kind === 'MultiheadAttention') {
                const streaming = forward(module, c, { needWeights: false });
                assert.equal(streaming.weights, null, 'needWeights: false gives weights null');
                assertClose(streaming.output, c.output, 'output with needWeights: false');
              }
            }),
          );
        }
      });
    }

    describe('fully masked rows', () => {
      test('MultiheadAttention: a batch whose every key is padding gets zero weights and output = out_proj.bias', () => {
        for (const name of ['fully_masked_batch_by_key_padding', 'fully_masked_batch_by_float_key_padding']) {
          const c = moduleFixture('mha', name);
          const [L, N, E] = c.query.shape;
          const m = c.key.shape[0];
          const kpm = c.keyPaddingMask;
          const masked = (x) => (kpm.data instanceof Uint8Array ? x === 1 : x === -Infinity);
          const dead = [...Array(N).keys()].filter((b) => kpm.data.subarray(b * m, (b + 1) * m).every(masked));
          assert.ok(dead.length > 0, `${name} has a fully padded batch`);
          const bias = c.stateDict['out_proj.bias'].data;
          withModule(attn, 'MultiheadAttention', c, (module) => {
            for (const needWeights of [true, false]) {
              for (const averageAttnWeights of [true, false]) {
                const result = module.forward(c.query, c.key, c.value, { keyPaddingMask: kpm, needWeights, averageAttnWeights });
                assert.ok(!result.output.data.some(Number.isNaN), 'no NaN');
                for (const b of dead) {
                  for (let l = 0; l < L; l++) {
                    const row = result.output.data.subarray((l * N + b) * E, (l * N + b + 1) * E);
                    assert.ok(row.every((x, e) => x === bias[e]), `${name} output[${l}, ${b}] = out_proj.bias (needWeights ${needWeights}): ${row}`);
                  }
                  if (needWeights) {
                    const per = result.weights.data.length / N;
                    assert.ok(result.weights.data.subarray(b * per, (b + 1) * per).every((w) => w === 0), `${name} weights of batch ${b} are zero`);
                  } else {
                    assert.equal(result.weights, null);
                  }
                }
                assertClose(result.output, c.output, 'output');
              }
            }
          });
        }
      });

      test('SelfAttention: a row whose every key is masked gets zero weights and a zero output', () => {
        const c = moduleFixture('self_attention', 'fully_masked_rows_bool');
        const [N, L] = c.x.shape;
        const dv = c.config.valueSize;
        const mask = c.attnMask; // [N, L, L], 1 = masked out
        const dead = [];
        for (let b = 0; b < N; b++)
          for (let i = 0; i < L; i++) if (mask.data.subarray((b * L + i) * L, (b * L + i + 1) * L).every((x) => x === 1)) dead.push([b, i]);
        assert.ok(dead.length > 0, 'the fixture has fully masked rows');
        withModule(attn, 'SelfAttention', c, (module) => {
          const { output, weights } = module.forward(c.x, { attnMask: mask });
          for (const [b, i] of dead) {
            assert.ok(output.data.subarray((b * L + i) * dv, (b * L + i + 1) * dv).every((x) => x === 0), `output[${b}, ${i}] is zero`);
            assert.ok(weights.data.subarray((b * L + i) * L, (b * L + i + 1) * L).every((x) => x === 0), `weights[${b}, ${i}] are zero`);
          }
        });
      });
    });

    describe('MultiheadAttention inputs', () => {
      test('key and value default to the query; value defaults to the key', () => {
        const c = moduleFixture('mha', 'bool_key_padding_mask');
        withModule(attn, 'MultiheadAttention', c, (module) => {
          const opts = { keyPaddingMask: c.keyPaddingMask, averageAttnWeights: false };
          const self = module.forward(c.query, c.query, c.query, opts);
          for (const got of [module.forward(c.query, undefined, undefined, opts), module.forward(c.query, null, null, opts)]) {
            assert.ok(bitIdentical(got.output.data, self.output.data), 'forward(x) output = forward(x, x, x)');
            assert.ok(bitIdentical(got.weights.data, self.weights.data), 'forward(x) weights = forward(x, x, x)');
          }
          assert.ok(bitIdentical(module.forward(c.query).output.data, module.forward(c.query, c.query, c.query).output.data));

          const cross = moduleFixture('mha', 'cross_attention_n3_m7');
          const explicit = module.forward(cross.query, cross.key, cross.key);
          const defaulted = module.forward(cross.query, cross.key);
          assert.ok(bitIdentical(defaulted.output.data, explicit.output.data), 'forward(q, k) = forward(q, k, k)');
          assert.ok(bitIdentical(defaulted.weights.data, explicit.weights.data));
          assert.ok(maxRelativeError(explicit.output.data, module.forward(cross.query, cross.key, cross.value).output.data) > 1e-3, 'the value matters');
        });
      });

      test('unbatched (L, E) input equals the batch of one, for both layouts', () => {
        const c = moduleFixture('mha', 'no_mask');
        const random = rng(5);
        const [L, S, E] = [4, 6, 8];
        const query = randomTensor([L, E], random);
        const key = randomTensor([S, E], random);
        const value = randomTensor([S, E], random);
        const batched = (t) => ({ shape: [t.shape[0], 1, E], data: t.data }); // (L, 1, E) = (1, L, E) in memory
        const kpm = { shape: [S], data: Uint8Array.from([0, 1, 0, 0, 1, 0]) };
        for (const batchFirst of [false, true]) {
          withModule(attn, 'MultiheadAttention', c, (module) => {
            for (const averageAttnWeights of [true, false]) {
              const opts = { averageAttnWeights, isCausal: true };
              const one = module.forward(query, key, value, { ...opts, keyPaddingMask: kpm });
              const b = (t) => (batchFirst ? { shape: [1, t.shape[0], E], data: t.data } : batched(t));
              const ref = module.forward(b(query), b(key), b(value), { ...opts, keyPaddingMask: { shape: [1, S], data: kpm.data } });
              assert.deepEqual(one.output.shape, [L, E]);
              assert.deepEqual(one.weights.shape, averageAttnWeights ? [L, S] : [2, L, S]);
              assert.deepEqual(ref.weights.shape, averageAttnWeights ? [1, L, S] : [1, 2, L, S]);
              assert.ok(maxRelativeError(one.output.data, ref.output.data) <= 1e-6, 'output');
              assert.ok(maxRelativeError(one.weights.data, ref.weights.data) <= 1e-6, 'weights');
              const streaming = module.forward(query, key, value, { ...opts, keyPaddingMask: kpm, needWeights: false });
              assert.equal(streaming.weights, null);
              assert.ok(maxRelativeError(streaming.output.data, one.output.data) <= 2e-5, 'streaming output');
            }
          }, { batchFirst });
        }
      });
    });

    test("RelativeMultiHeadAttention with weightsLayout 'BHnm' gives each head's [n, m] plane", () => {
      for (const c of loadModuleFixtures('relative_attention')) {
        const [n, m, B, H] = c.weights.shape;
        const expected = new Float32Array(c.weights.data.length);
        for (let i = 0; i < n; i++)
          for (let j = 0; j < m; j++)
            for (let b = 0; b < B; b++)
              for (let h = 0; h < H; h++) expected[((b * H + h) * n + i) * m + j] = c.weights.data[((i * m + j) * B + b) * H + h];
        withModule(attn, 'RelativeMultiHeadAttention', c, (module) => {
          const opts = c.mask ? { mask: c.mask } : {};
          const labml = module.forward(c.query, c.key, c.value, { ...opts, weightsLayout: 'nmBH' });
          const planes = module.forward(c.query, c.key, c.value, { ...opts, weightsLayout: 'BHnm' });
          assert.deepEqual(planes.weights.shape, [B, H, n, m], c.name);
          assertClose(planes.weights, { shape: [B, H, n, m], data: expected }, `${c.name} weights`);
          assertClose(labml.weights, c.weights, `${c.name}: 'nmBH' is the default layout`);
          assert.ok(bitIdentical(planes.output.data, labml.output.data), `${c.name}: the layout does not change the output`);
        });
      }
    });

    test('RelativeMultiHeadAttention reads a Float32Array mask as 0 = masked, nonzero = keep', () => {
      const keepValues = [1, 0.5, -3, 7, 1e-20, -Infinity, Infinity];
      for (const name of ['causal_mask_nm1_memory', 'padding_mask_1mB', 'fully_masked_rows']) {
        const c = moduleFixture('relative_attention', name);
        let k = 0;
        const floatMask = {
          shape: [...c.mask.shape],
          data: Float32Array.from(c.mask.data, (x) => (x ? keepValues[k++ % keepValues.length] : k++ % 2 ? -0 : 0)),
        };
        withModule(attn, 'RelativeMultiHeadAttention', c, (module) => {
          const bytes = module.forward(c.query, c.key, c.value, { mask: c.mask });
          const floats = module.forward(c.query, c.key, c.value, { mask: floatMask });
          assertClose(floats.output, c.output, `${name} output`);
          assertClose(floats.weights, c.weights, `${name} weights`);
          assert.ok(bitIdentical(floats.output.data, bytes.output.data), `${name}: same output as the Uint8Array mask`);
          assert.ok(bitIdentical(floats.weights.data, bytes.weights.data), `${name}: same weights as the Uint8Array mask`);
        });
      }
    });
  });
}

describe('MultiheadAttention with 2 threads equals 1 thread', () => {
  let one;
  let two;
  before(async () => {
    [one, two] = await Promise.all([init(), init({ threads: 2 })]);
    assert.equal(two.features.threads, 2);
  });

  function compare(build, state) {
    const results = [one, two].map((attn) => {
      const module = build(attn);
      try {
        module.loadStateDict(state.stateDict);
        return [true, false].map((needWeights) => state.forward(module, needWeights));
      } finally {
        module.dispose();
      }
    });
    for (const i of [0, 1]) {
      const [a, b] = [results[0][i], results[1][i]];
      assert.deepEqual(b.output.shape, a.output.shape);
      const error = maxRelativeError(b.output.data, a.output.data);
      assert.ok(error <= 1e-6, `output differs by ${error}`);
      if (a.weights) {
        const werror = maxRelativeError(b.weights.data, a.weights.data);
        assert.ok(werror <= 1e-6, `weights differ by ${werror}`);
      } else assert.equal(b.weights, null);
    }
  }

  test('large_E36_H4_L33', () => {
    const c = moduleFixture('mha', 'large_E36_H4_L33');
    compare((attn) => MODULE_KINDS.MultiheadAttention.create(attn, c), {
      stateDict: c.stateDict,
      forward: (module, needWeights) => MODULE_KINDS.MultiheadAttention.forward(module, c, { needWeights }),
    });
  });

  test('random E = 64, 8 heads, L = 96, S = 130, N = 3, causal and padding', () => {
    const random = rng(31337);
    const [E, H, L, S, N] = [64, 8, 96, 130, 3];
    const scaled = (shape, s) => {
      const t = randomTensor(shape, random);
      t.data.forEach((x, i) => (t.data[i] = x * s));
      return t;
    };
    const stateDict = {
      in_proj_weight: scaled([3 * E, E], 1 / Math.sqrt(E)),
      in_proj_bias: scaled([3 * E], 0.1),
      'out_proj.weight': scaled([E, E], 1 / Math.sqrt(E)),
      'out_proj.bias': scaled([E], 0.1),
    };
    const query = randomTensor([L, N, E], random);
    const key = randomTensor([S, N, E], random);
    const value = randomTensor([S, N, E], random);
    const keyPaddingMask = { shape: [N, S], data: Uint8Array.from({ length: N * S }, (_, i) => (i % S >= [130, 100, 7][Math.floor(i / S)] ? 1 : 0)) };
    for (const averageAttnWeights of [true, false]) {
      compare((attn) => new attn.MultiheadAttention(E, H), {
        stateDict,
        forward: (module, needWeights) => module.forward(query, key, value, { keyPaddingMask, isCausal: true, needWeights, averageAttnWeights }),
      });
    }
  });
});

describe('module properties', () => {
  let attn;
  before(async () => {
    attn = await init();
  });

  const CONSTRUCTIONS = {
    MultiheadAttention: {
      make: (a) => new a.MultiheadAttention(12, 3, { kdim: 7, vdim: 5, batchFirst: true, addZeroAttn: true, dropout: 0.25 }),
      want: { embedDim: 12, numHeads: 3, bias: true, addBiasKV: false, addZeroAttn: true, kdim: 7, vdim: 5, batchFirst: true, dropout: 0.25 },
    },
    'MultiheadAttention (defaults)': {
      make: (a) => new a.MultiheadAttention(8, 2),
      want: { embedDim: 8, numHeads: 2, bias: true, addBiasKV: false, addZeroAttn: false, kdim: 8, vdim: 8, batchFirst: false, dropout: 0 },
    },
    SelfAttention: { make: (a) => new a.SelfAttention(8, 6, 10), want: { embedDim: 8, keySize: 6, valueSize: 10 } },
    AdditiveAttention: { make: (a) => new a.AdditiveAttention(7, 5, 9), want: { querySize: 7, keySize: 5, hiddenSize: 9 } },
    RelativeMultiHeadAttention: { make: (a) => new a.RelativeMultiHeadAttention(3, 12, { P: 16 }), want: { heads: 3, dModel: 12, P: 16 } },
    'RelativeMultiHeadAttention (default P)': { make: (a) => new a.RelativeMultiHeadAttention(2, 8), want: { heads: 2, dModel: 8, P: 4096 } },
  };

  for (const [name, { make, want }] of Object.entries(CONSTRUCTIONS)) {
    test(`${name} exposes its constructor arguments read-only`, () => {
      const module = make(attn);
      try {
        for (const [key, value] of Object.entries(want)) {
          assert.equal(module[key], value, key);
          const replacement = typeof value === 'boolean' ? !value : 3;
          // ES modules are strict: assigning a read-only property throws a TypeError.
          assert.throws(() => {
            module[key] = replacement;
          }, TypeError, `assigning ${key}`);
          assert.equal(Reflect.set(module, key, replacement), false, `Reflect.set(${key})`);
          assert.equal(module[key], value, `${key} unchanged`);
        }
      } finally {
        module.dispose();
      }
    });
  }

  for (const [kind, { file }] of Object.entries(MODULE_KINDS)) {
    describe(`${kind} train/eval and dropout`, () => {
      const c = loadModuleFixtures(file)[0];
      const forward = (module, opts) => MODULE_KINDS[kind].forward(module, c, opts);

      test('starts in eval mode; train() and eval() switch and return the module', () => {
        withModule(attn, kind, c, (module) => {
          assert.equal(module.training, false);
          assert.equal(module.train(), module);
          assert.equal(module.training, true);
          assert.equal(module.train(false), module);
          assert.equal(module.training, false);
          module.train(true);
          assert.equal(module.eval(), module);
          assert.equal(module.training, false);
          assert.throws(() => {
            module.training = true;
          }, TypeError, 'training is not assignable');
          assert.equal(module.training, false);
        });
      });

      test('dropout applies only in training mode, reproducibly per seed', () => {
        const plain = loadedModule(attn, kind, c);
        const dropping = loadedModule(attn, kind, c, { dropout: 0.5 });
        try {
          const reference = forward(plain);
          const evalOut = forward(dropping);
          assert.ok(bitIdentical(evalOut.output.data, reference.output.data), 'eval mode ignores dropout');
          if (reference.weights) assert.ok(bitIdentical(evalOut.weights.data, reference.weights.data));
          assert.ok(bitIdentical(forward(dropping, { seed: 7 }).output.data, reference.output.data), 'the seed does nothing in eval mode');

          dropping.train();
          const a1 = forward(dropping, { seed: 1 });
          const a2 = forward(dropping, { seed: 1 });
          const b = forward(dropping, { seed: 2 });
          assert.ok(bitIdentical(a1.output.data, a2.output.data), 'the same seed repeats exactly');
          assert.ok(!bitIdentical(a1.output.data, b.output.data), 'different seeds differ');
          assert.ok(maxRelativeError(a1.output.data, reference.output.data) > 1e-4, 'dropout changes the output');
          assert.ok(!a1.output.data.some(Number.isNaN));

          // Successive unseeded calls draw differently.
          assert.ok(!bitIdentical(forward(dropping).output.data, forward(dropping).output.data), 'unseeded calls differ');

          // A module without dropout is unaffected by training mode.
          plain.train();
          assert.ok(bitIdentical(forward(plain, { seed: 3 }).output.data, reference.output.data), 'dropout 0 in training mode');

          if (kind === 'MultiheadAttention') {
            // The streaming path draws the same dropout as the weights path for a seed.
            const streaming = forward(dropping, { seed: 1, needWeights: false });
            assert.equal(streaming.weights, null);
            assertClose(streaming.output, a1.output, 'dropout output with needWeights: false');
          }

          dropping.eval();
          assert.ok(bitIdentical(forward(dropping, { seed: 1 }).output.data, reference.output.data), 'back in eval mode: no dropout');
        } finally {
          plain.dispose();
          dropping.dispose();
        }
      });
    });
  }
});
