// attn.rope with Hugging Face's RoPE schemes (ropeScaling: default, linear, dynamic, yarn, longrope,
// llama3) and with the frequencies given (invFreq, attentionScaling), on every build, against
// tests/fixtures/rope_scaling.json (written by tests/fixtures/rope_scaling_fixture.py from a float64
// transcription of modeling_rope_utils.py); plus how the paths relate: a scheme equals its own
// frequencies given as invFreq, and positions [N, L] equal N calls with [L] at the batch's seq_len.
// (Bad options: errors.test.js; the core's frequencies: tests/cpp/rope_test.cpp.)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { init } from 'attention-wasm';

import { BUILDS, TOLERANCE, assertRopeCase, bitIdentical, maxRelativeError, randomTensor, rng, toTensor } from './helpers.js';

// Two computations of the same angles whose inverse frequencies may differ in the last bit (the
// fixture's, from Python, and the core's): their float32 cos/sin may differ by one rounding.
const SAME_ANGLES = 1e-6;

/** The fixture's options as attn.rope takes them: typed positions and invFreq. */
function ropeOptions(options) {
  const opts = { ...options };
  if (Array.isArray(opts.positions)) opts.positions = Int32Array.from(opts.positions);
  else if (opts.positions) opts.positions = { shape: [...opts.positions.shape], data: Int32Array.from(opts.positions.data) };
  if (opts.invFreq) opts.invFreq = Float64Array.from(opts.invFreq);
  return opts;
}

const CASES = JSON.parse(readFileSync(fileURLToPath(new URL('../fixtures/rope_scaling.json', import.meta.url)), 'utf8')).cases.map((c) => ({
  name: c.name,
  x: toTensor(c.x),
  opts: ropeOptions(c.options),
  seqLen: c.seqLen,
  invFreq: Float64Array.from(c.invFreq),
  attentionScaling: c.attentionScaling,
  output: toTensor(c.output),
}));

/** The same options with the scheme replaced by the given frequencies and attention factor. */
function givenOptions(opts, invFreq, attentionScaling) {
  const { ropeScaling, maxPositionEmbeddings, ...rest } = opts;
  return { ...rest, invFreq, attentionScaling };
}

/** Row n of x [N, ...]: a tensor of shape [...]. */
function row(x, n) {
  const size = x.data.length / x.shape[0];
  return { shape: x.shape.slice(1), data: x.data.slice(n * size, (n + 1) * size) };
}

function rowPositions(positions, n) {
  const L = positions.shape[1];
  return positions.data.slice(n * L, (n + 1) * L);
}

function assertRowsEqualSeparateCalls(attn, x, opts, rowOpts = () => ({})) {
  const batched = attn.rope(x, opts);
  const size = x.data.length / x.shape[0];
  for (let n = 0; n < x.shape[0]; n++) {
    const alone = attn.rope(row(x, n), { ...opts, positions: rowPositions(opts.positions, n), ...rowOpts(n) });
    assert.deepEqual(alone.shape, x.shape.slice(1));
    assert.ok(bitIdentical(alone.data, batched.data.subarray(n * size, (n + 1) * size)), `row ${n}`);
  }
}

test('the fixture covers every rope_type, given frequencies and each option', () => {
  const types = new Set(CASES.map((c) => (c.opts.invFreq ? 'given' : c.opts.ropeScaling?.rope_type ?? c.opts.ropeScaling?.type ?? 'default')));
  assert.deepEqual([...types].sort(), ['default', 'dynamic', 'given', 'linear', 'llama3', 'longrope', 'yarn']);
  assert.ok(CASES.some((c) => c.opts.interleaved));
  assert.ok(CASES.some((c) => c.opts.rotaryDim !== undefined && c.opts.rotaryDim < c.x.shape.at(-1)));
  assert.ok(CASES.some((c) => c.opts.positions?.shape?.length === 2 && c.x.shape.length === 4));
  assert.ok(CASES.some((c) => c.opts.offset !== undefined));
  assert.ok(CASES.some((c) => c.x.shape.length === 3));
});

for (const build of BUILDS) {
  describe(`${build.name} build`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    describe('matches the float64 reference', () => {
      for (const c of CASES) {
        test(c.name, () => {
          assertRopeCase(attn, c);
        });
      }
    });

    describe("a scheme equals its frequencies given as invFreq and attentionScaling", () => {
      for (const c of CASES.filter((c) => !c.opts.invFreq)) {
        test(c.name, () => {
          const byScheme = attn.rope(c.x, c.opts);
          const given = attn.rope(c.x, givenOptions(c.opts, c.invFreq, c.attentionScaling));
          const error = maxRelativeError(given.data, byScheme.data);
          assert.ok(error <= SAME_ANGLES, `max relative error ${error} > ${SAME_ANGLES}`);
          const reference = maxRelativeError(given.data, c.output.data);
          assert.ok(reference <= TOLERANCE, `given frequencies against the reference: ${reference} > ${TOLERANCE}`);
          // A Float32Array is read as the doubles it holds.
          const single = Float32Array.from(c.invFreq);
          const asSingle = attn.rope(c.x, givenOptions(c.opts, single, c.attentionScaling));
          assert.ok(bitIdentical(asSingle.data, attn.rope(c.x, givenOptions(c.opts, Float64Array.from(single), c.attentionScaling)).data));
        });
      }
      test('attentionScaling defaults to 1 and scales cos and sin', () => {
        const x = randomTensor([2, 3, 8], rng(11));
        const invFreq = new Float64Array([1, 0.1, 0.01, 0.001]);
        const plain = attn.rope(x, { invFreq });
        const defaultScheme = attn.rope(x, {});
        assert.ok(maxRelativeError(plain.data, defaultScheme.data) <= SAME_ANGLES);
        const scaled = attn.rope(x, { invFreq, attentionScaling: 1.5 });
        assert.ok(maxRelativeError(scaled.data, plain.data.map((v) => 1.5 * v)) <= 1e-6);
      });
    });

    describe('positions [N, L] equal N calls with [L]', () => {
      test('length-independent schemes (default, linear, yarn, llama3, given), rotate-half and interleaved', () => {
        const x = randomTensor([3, 2, 4, 16], rng(21));
        const positions = { shape: [3, 4], data: Int32Array.from([0, 1, 2, 3, 9000, 17, 5, 5, 100, 4096, 8191, 8192]) };
        const schemes = [
          {},
          { ropeScaling: { rope_type: 'linear', factor: 4 } },
          { ropeScaling: { rope_type: 'yarn', factor: 8, original_max_position_embeddings: 256 } },
          { ropeScaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 1024 }, base: 500000 },
          { invFreq: new Float64Array([1, 0.2, 0.03, 0.004, 5e-4, 6e-5]), attentionScaling: 0.9, rotaryDim: 12 },
        ];
        for (const scheme of schemes)
          for (const interleaved of [false, true]) assertRowsEqualSeparateCalls(attn, x, { ...scheme, interleaved, positions });
      });

      test('dynamic and longrope: equal when every row reaches the batch maximum', () => {
        const x = randomTensor([2, 3, 4, 16], rng(22));
        const positions = { shape: [2, 4], data: Int32Array.from([0, 1, 2, 200, 197, 198, 199, 200]) };
        assertRowsEqualSeparateCalls(attn, x, { ropeScaling: { rope_type: 'dynamic', factor: 2 }, maxPositionEmbeddings: 64, positions });
        const longrope = { rope_type: 'longrope', short_factor: [1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7], long_factor: [2, 3, 4, 5, 6, 7, 8, 9], original_max_position_embeddings: 64 };
        assertRowsEqualSeparateCalls(attn, x, { ropeScaling: longrope, maxPositionEmbeddings: 1024, positions });
      });

      test("dynamic: seq_len is the batch's (torch.max(position_ids) + 1), so a shorter row alone differs", () => {
        const c = CASES.find((k) => k.name === 'batch_positions_dynamic');
        assert.equal(c.seqLen, 104);
        // Alone at its own seq_len (4, below maxPositionEmbeddings), row 0 keeps the default frequencies.
        const batched = attn.rope(c.x, c.opts);
        const alone = attn.rope(row(c.x, 0), { ...c.opts, positions: rowPositions(c.opts.positions, 0) });
        assert.ok(!bitIdentical(alone.data, batched.data.subarray(0, alone.data.length)));
        // With the batch's frequencies given, every row alone equals its part of the batch.
        const batchFrequencies = attn.rope(c.x, givenOptions(c.opts, c.invFreq, c.attentionScaling));
        assertRowsEqualSeparateCalls(attn, c.x, givenOptions(c.opts, c.invFreq, c.attentionScaling));
        assert.ok(maxRelativeError(batchFrequencies.data, batched.data) <= SAME_ANGLES);
      });
    });

    test('offset o equals positions o, o + 1, … for a length-dependent scheme', () => {
      for (const c of CASES.filter((k) => k.opts.offset !== undefined)) {
        const L = c.x.shape.at(-2);
        const { offset, ...rest } = c.opts;
        const byPositions = attn.rope(c.x, { ...rest, positions: Int32Array.from({ length: L }, (_, i) => offset + i) });
        assert.ok(bitIdentical(attn.rope(c.x, c.opts).data, byPositions.data), c.name);
      }
    });
  });
}
