// Shared helpers for the node:test suites: the PyTorch-generated fixtures, tensor builders and
// the contract's error measure.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export { safetensorsBytes } from './checkpoint-writer.js';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const FIXTURES_PATH = fileURLToPath(new URL('../fixtures/sdpa.json', import.meta.url));

// The contract's tolerance against PyTorch.
export const TOLERANCE = 2e-5;

// The fixtures write non-finite numbers as the strings "Infinity", "-Infinity" and "NaN".
function decodeNumber(x) {
  if (typeof x === 'number') return x;
  if (x === 'Infinity') return Infinity;
  if (x === '-Infinity') return -Infinity;
  if (x === 'NaN') return NaN;
  throw new Error(`fixture: unexpected value ${JSON.stringify(x)}`);
}

function numel(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

/** A fixture tensor `{ shape, data }` as an API tensor (Float32Array data). */
export function toTensor({ shape, data }) {
  if (data.length !== numel(shape)) throw new Error(`fixture: ${data.length} values for shape [${shape}]`);
  return { shape: [...shape], data: Float32Array.from(data, decodeNumber) };
}

/** A fixture mask: bool masks become Uint8Array (0/1), float masks Float32Array. */
export function toMask(mask) {
  if (mask === null) return null;
  if (mask.dtype === 'bool') return { shape: [...mask.shape], data: Uint8Array.from(mask.data, decodeNumber) };
  if (mask.dtype === 'float') return toTensor(mask);
  throw new Error(`fixture: unknown mask dtype ${mask.dtype}`);
}

/** Fixture ids (document ids) as an API ids tensor, or null. */
function toIds(ids) {
  return ids ? { shape: [...ids.shape], data: Int32Array.from(ids.data) } : null;
}

let cached;
/** Every case of tests/fixtures/sdpa.json, decoded into API values. */
export function loadFixtures() {
  cached ??= JSON.parse(readFileSync(FIXTURES_PATH, 'utf8')).cases.map((c) => ({
    name: c.name,
    query: toTensor(c.query),
    key: toTensor(c.key),
    value: toTensor(c.value),
    attnMask: toMask(c.attnMask),
    isCausal: c.isCausal,
    scale: c.scale,
    enableGqa: c.enableGqa ?? false,
    window: c.window ?? null,
    softcap: c.softcap ?? null,
    alibi: c.alibi === true || c.alibi == null ? c.alibi ?? null : toTensor(c.alibi).data,
    documentIds: toIds(c.documentIds),
    queryDocumentIds: toIds(c.queryDocumentIds),
    keyDocumentIds: toIds(c.keyDocumentIds),
    output: toTensor(c.output),
    weights: toTensor(c.weights),
  }));
  return cached;
}

let ropeCases;
/** Every case of tests/fixtures/rope.json: { name, x, opts (attn.rope's options), output }. */
export function loadRopeFixtures() {
  const path = fileURLToPath(new URL('../fixtures/rope.json', import.meta.url));
  ropeCases ??= JSON.parse(readFileSync(path, 'utf8')).cases.map((c) => {
    const opts = { interleaved: c.interleaved };
    if (c.positions !== null) opts.positions = Int32Array.from(c.positions);
    for (const option of ['offset', 'base', 'rotaryDim']) if (c[option] !== null) opts[option] = c[option];
    return { name: c.name, x: toTensor(c.x), opts, output: toTensor(c.output) };
  });
  return ropeCases;
}

export function fixture(name) {
  const found = loadFixtures().find((c) => c.name === name);
  if (!found) throw new Error(`no fixture case named ${name}`);
  return found;
}

/** The scaledDotProductAttention options a fixture case describes. */
export function fixtureOptions(c, extra = {}) {
  const opts = { isCausal: c.isCausal, ...extra };
  if (c.attnMask) opts.attnMask = c.attnMask;
  if (c.scale !== null) opts.scale = c.scale;
  if (c.enableGqa) opts.enableGqa = true;
  for (const option of ['window', 'softcap', 'alibi', 'documentIds', 'queryDocumentIds', 'keyDocumentIds'])
    if (c[option] !== null) opts[option] = c[option];
  return opts;
}

/**
 * max |got - want| / (1 + |want|). A non-finite `want` must be matched exactly (NaN only by
 * NaN); any mismatch there, or a non-finite `got` where `want` is finite, gives Infinity.
 */
export function maxRelativeError(got, want) {
  if (got.length !== want.length) throw new Error(`length ${got.length} compared with length ${want.length}`);
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const g = got[i];
    const w = want[i];
    if (!Number.isFinite(w) || !Number.isFinite(g)) {
      const same = g === w || (Number.isNaN(g) && Number.isNaN(w));
      if (!same) return Infinity;
      continue;
    }
    worst = Math.max(worst, Math.abs(g - w) / (1 + Math.abs(w)));
  }
  return worst;
}

/** True when two typed arrays hold exactly the same bytes. */
export function bitIdentical(a, b) {
  if (a.byteLength !== b.byteLength) return false;
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  return x.every((byte, i) => byte === y[i]);
}

/** Seeded floats in [0, 1) for test data (tests/js/random.js). */
export { rng } from './random.js';

/** A tensor of the given shape filled with uniform values in [-1, 1) from `random`. */
export function randomTensor(shape, random) {
  const data = new Float32Array(numel(shape));
  for (let i = 0; i < data.length; i++) data[i] = random() * 2 - 1;
  return { shape: [...shape], data };
}

/**
 * Float64 reference for one query row of unmasked attention on rank-2 tensors: query [n, d],
 * key [m, d], value [m, dv]. Returns { weights: Float64Array(m), output: Float64Array(dv) }.
 */
export function referenceRow(query, key, value, i, scale = 1 / Math.sqrt(query.shape[1])) {
  const d = query.shape[1];
  const m = key.shape[0];
  const dv = value.shape[1];
  const scores = new Float64Array(m);
  let max = -Infinity;
  for (let j = 0; j < m; j++) {
    let s = 0;
    for (let c = 0; c < d; c++) s += query.data[i * d + c] * key.data[j * d + c];
    scores[j] = s * scale;
    max = Math.max(max, scores[j]);
  }
  let sum = 0;
  for (let j = 0; j < m; j++) sum += (scores[j] = Math.exp(scores[j] - max));
  const output = new Float64Array(dv);
  for (let j = 0; j < m; j++) {
    scores[j] /= sum;
    for (let c = 0; c < dv; c++) output[c] += scores[j] * value.data[j * dv + c];
  }
  return { weights: scores, output };
}

// ---- shared by the module, mask and lifecycle suites -------------------------------------------

/** The three builds every numeric suite runs on: `init(build.opts)`. */
export const BUILDS = [
  { name: 'SIMD', opts: undefined, simd: true, threads: 1 },
  { name: 'scalar', opts: { simd: false }, simd: false, threads: 1 },
  { name: 'threaded', opts: { threads: 2 }, simd: true, threads: 2 },
];

// A fixture value: masks carry a dtype, tensors only { shape, data }; anything else is kept as is.
function decodeValue(value) {
  if (value === null || typeof value !== 'object' || !('shape' in value) || !('data' in value)) return value;
  return 'dtype' in value ? toMask(value) : toTensor(value);
}

const moduleFixtures = new Map();
/**
 * Every case of tests/fixtures/<file>.json (mha, self_attention, additive_attention,
 * relative_attention), decoded: tensors and masks as API values, `stateDict` as name -> tensor.
 */
export function loadModuleFixtures(file) {
  if (!moduleFixtures.has(file)) {
    const path = fileURLToPath(new URL(`../fixtures/${file}.json`, import.meta.url));
    const cases = JSON.parse(readFileSync(path, 'utf8')).cases.map((c) => {
      const decoded = {};
      for (const [key, value] of Object.entries(c)) {
        decoded[key] =
          key === 'stateDict'
            ? Object.fromEntries(Object.entries(value).map(([name, tensor]) => [name, toTensor(tensor)]))
            : decodeValue(value);
      }
      return decoded;
    });
    moduleFixtures.set(file, cases);
  }
  return moduleFixtures.get(file);
}

export function moduleFixture(file, name) {
  const found = loadModuleFixtures(file).find((c) => c.name === name);
  if (!found) throw new Error(`no case named ${name} in ${file}.json`);
  return found;
}

/** A tensor of `shape` whose element i is f(i) (default: a smooth deterministic pattern). */
export function tensorOf(shape, f = (i) => Math.sin(0.7 * i + 0.3)) {
  return { shape: [...shape], data: Float32Array.from({ length: numel(shape) }, (_, i) => f(i)) };
}

/** Shapes equal and max relative error within `tolerance` (the contract's by default). */
export function assertClose(got, want, what, tolerance = TOLERANCE) {
  assert.ok(got, `${what}: missing`);
  assert.deepEqual(got.shape, want.shape, `${what}: shape`);
  const error = maxRelativeError(got.data, want.data);
  assert.ok(error <= tolerance, `${what}: max relative error ${error} > ${tolerance}`);
}

/**
 * Asserts `fn` throws an AttentionError whose `argument` matches `argument` (string: equal,
 * RegExp: match), whose message names it, and which contains every string / matches every RegExp
 * in `message`. Returns the error.
 */
export function assertAttentionError(fn, AttentionError, argument, message = []) {
  let error;
  try {
    fn();
  } catch (e) {
    error = e;
  }
  assert.ok(error, 'expected a throw');
  assert.ok(error instanceof AttentionError, `expected an AttentionError, got ${error?.name}: ${error?.message}`);
  assert.ok(error instanceof Error, 'an Error subclass');
  if (typeof argument === 'string') assert.equal(error.argument, argument, error.message);
  else assert.match(error.argument, argument, error.message);
  assert.ok(error.message.includes(error.argument), `message names ${error.argument}: ${error.message}`);
  for (const part of message) {
    if (typeof part === 'string') assert.ok(error.message.includes(part), `message contains ${part}: ${error.message}`);
    else assert.match(error.message, part);
  }
  return error;
}

/**
 * The four module fixtures: how to construct a case's module (extra constructor options merged
 * in) and run its forward (extra forward options merged in). `load` builds and loads weights.
 */
export const MODULE_KINDS = {
  MultiheadAttention: {
    file: 'mha',
    create: (attn, c, opts = {}) => {
      const { embedDim, numHeads, ...rest } = c.config;
      return new attn.MultiheadAttention(embedDim, numHeads, { ...rest, ...opts });
    },
    forward: (module, c, opts = {}) =>
      module.forward(c.query, c.key, c.value, {
        attnMask: c.attnMask,
        keyPaddingMask: c.keyPaddingMask,
        isCausal: c.isCausal,
        needWeights: c.needWeights,
        averageAttnWeights: c.averageAttnWeights,
        ...opts,
      }),
  },
  SelfAttention: {
    file: 'self_attention',
    create: (attn, c, opts) => new attn.SelfAttention(c.config.embedDim, c.config.keySize, c.config.valueSize, opts),
    forward: (module, c, opts = {}) => module.forward(c.x, { attnMask: c.attnMask, ...opts }),
  },
  AdditiveAttention: {
    file: 'additive_attention',
    create: (attn, c, opts) => new attn.AdditiveAttention(c.config.querySize, c.config.keySize, c.config.hiddenSize, opts),
    forward: (module, c, opts = {}) => module.forward(c.query, c.key, c.value, { attnMask: c.attnMask, ...opts }),
  },
  RelativeMultiHeadAttention: {
    file: 'relative_attention',
    create: (attn, c, opts = {}) => new attn.RelativeMultiHeadAttention(c.config.heads, c.config.dModel, { P: c.config.P, ...opts }),
    forward: (module, c, opts = {}) => module.forward(c.query, c.key, c.value, { mask: c.mask, ...opts }),
  },
};

/** A module for fixture case `c` of `kind`, constructed and loaded. */
export function loadedModule(attn, kind, c, opts) {
  const module = MODULE_KINDS[kind].create(attn, c, opts);
  module.loadStateDict(c.stateDict);
  return module;
}

/** attn.rope on a fixture case { x, opts, output }: within the contract's tolerance, x left alone. */
export function assertRopeCase(attn, c) {
  const before = c.x.data.slice();
  const output = attn.rope(c.x, c.opts);
  assert.deepEqual(output.shape, c.output.shape);
  const error = maxRelativeError(output.data, c.output.data);
  assert.ok(error <= TOLERANCE, `max relative error ${error} > ${TOLERANCE}`);
  assert.ok(bitIdentical(c.x.data, before), 'x is left alone');
}
