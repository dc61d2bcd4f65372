// The public API (documented in index.d.ts and the README): init() and the Attention instance it returns. Embind is a
// private layer below; everything users touch is validated here and in the modules it imports.
import { AttentionError, describe, keepClassNames } from './errors.js';
import { checkWasmBaseUrl, checkWasmBinary, load } from './loader.js';
import { createMasks } from './masks.js';
import { createKVCacheClass } from './kv_cache.js';
import { createModuleClasses, forward } from './modules.js';
import { internals } from './owned.js';
import { disposeSymbol, idsView, maskView, Runtime, tensorView, throwIfFailed } from './runtime.js';
import { checkRopeScheme, ROPE_SCHEME_OPTIONS, ropeScalingStruct } from './rope.js';
import { loadSafetensors } from './safetensors.js';
import {
  checkAlibi, checkBoolean, checkChoice, checkIds, checkMask, checkNumber, checkOptions, checkOutArrays, checkPositions, checkTensor, resultEntries,
} from './validate.js';

export { AttentionError };

// Replaced with package.json's version when the bundle is built.
const VERSION = typeof __ATTENTION_VERSION__ === 'string' ? __ATTENTION_VERSION__ : '0.0.0-dev';

const SDPA_OPTIONS = [
  'attnMask', 'isCausal', 'scale', 'dropoutP', 'seed', 'needWeights', 'out',
  'enableGqa', 'window', 'softcap', 'alibi', 'documentIds', 'queryDocumentIds', 'keyDocumentIds',
];
const ROPE_OPTIONS = ['positions', 'offset', 'base', 'rotaryDim', 'interleaved', ...ROPE_SCHEME_OPTIONS];

// config.json's hidden_act → the core's _Activation: gelu_new and gelu_pytorch_tanh are one formula.
const ACTIVATIONS = { silu: 'silu', gelu: 'gelu', gelu_new: 'gelu_tanh', gelu_pytorch_tanh: 'gelu_tanh' };
const FEED_FORWARD_PARTS = ['gate', 'up', 'gateUp', 'down'];

// isCausal as the name of one of the core's attn::Causal; absent, its default.
const CAUSAL = new Map([[false, 'none'], [true, 'upperLeft'], ['upperLeft', 'upperLeft'], ['lowerRight', 'lowerRight']]);

function checkCausal(value) {
  if (value === undefined) return undefined;
  if (!CAUSAL.has(value)) throw new AttentionError('isCausal', "false, true, 'upperLeft' or 'lowerRight'", describe(value));
  return CAUSAL.get(value);
}

// Document ids for the queries and the keys; `shared` when one documentIds serves both.
function checkDocuments(opts) {
  const shared = checkIds(opts.documentIds, 'documentIds');
  const queries = checkIds(opts.queryDocumentIds, 'queryDocumentIds');
  const keys = checkIds(opts.keyDocumentIds, 'keyDocumentIds');
  if (shared && (queries || keys))
    throw new AttentionError('documentIds', 'documentIds alone, or queryDocumentIds with keyDocumentIds', 'both kinds');
  if (shared) return { shared: true, queries: shared, keys: shared };
  if (!queries !== !keys) {
    const [missing, given] = queries ? ['keyDocumentIds', 'queryDocumentIds'] : ['queryDocumentIds', 'keyDocumentIds'];
    throw new AttentionError(missing, `ids given with ${given}`, 'none');
  }
  return { shared: false, queries, keys };
}

/**
 * Loads the fastest build this engine runs and returns an independent instance.
 * @param {object} [opts] InitOptions in index.d.ts: threads, simd, relaxedSimd, wasmBaseUrl, wasmBinary
 */
export async function init(opts) {
  opts = checkOptions(opts, ['threads', 'simd', 'relaxedSimd', 'wasmBaseUrl', 'wasmBinary']);
  const allowSimd = checkBoolean(opts.simd, 'simd', true);
  const threads = opts.threads === undefined ? 1 : checkNumber(opts.threads, 'threads', { min: 1, max: 64, integer: true });
  const wasmBaseUrl = checkWasmBaseUrl(opts.wasmBaseUrl);
  const wasmBinary = checkWasmBinary(opts.wasmBinary);
  // Callers who pass wasm bytes chose their builds before relaxed ones existed or on purpose:
  // relaxed only when asked for (relaxedSimd: true) or given bytes of a relaxed build.
  const givenRelaxed = wasmBinary && ('relaxed' in wasmBinary || 'threads-relaxed' in wasmBinary);
  const allowRelaxed = checkBoolean(opts.relaxedSimd, 'relaxedSimd', !wasmBinary || givenRelaxed);
  const { build, wasm } = await load({ threads, allowSimd, allowRelaxed, wasmBaseUrl, wasmBinary });
  // Builds without threads report 1 whatever was asked.
  const threadsInUse = wasm._setThreadCount(threads);
  return new Attention(new Runtime(wasm, build), build, { simd: build !== 'scalar', threads: threadsInUse, version: VERSION });
}

class Attention {
  #runtime;
  #defaultSeed = 0;

  constructor(runtime, build, features) {
    this.#runtime = runtime;
    this.build = build;
    this.features = Object.freeze(features);
    this.masks = createMasks(runtime);
    const KVCache = createKVCacheClass(runtime);
    this.KVCache = KVCache;
    Object.assign(this, createModuleClasses(runtime, KVCache));
    Object.freeze(this);
  }

  /**
   * The tensors of a .safetensors file, or of a model's shards (an array), in the headers' order:
   * a Map from names to { data: Float32Array, shape }, ready for any module's loadStateDict; with
   * `{ dtype: 'f16' }` binary16 tensors { data: Uint16Array, shape, dtype: 'f16' }. The map's
   * `metadata` holds the files' `__metadata__`.
   */
  loadSafetensors(bytes, opts) {
    this.#runtime.enter('loadSafetensors');
    opts = checkOptions(opts, ['dtype']);
    return loadSafetensors(bytes, checkChoice(opts.dtype, 'dtype', ['f32', 'f16', 'bf16'], 'f32'));
  }

  /** Heap size of this instance and the number of modules not yet disposed. */
  stats() {
    this.#runtime.enter('stats');
    return { wasmHeapBytes: this.#runtime.heapBytes(), liveObjects: this.#runtime.liveObjects };
  }

  /**
   * Ends the instance: frees its modules, terminates its pthread workers and releases its wasm
   * memory. Every later call (modules made earlier included) throws an AttentionError; a second
   * dispose() does nothing.
   */
  dispose() {
    this.#runtime.dispose();
  }

  /**
   * torch.nn.functional.scaled_dot_product_attention. query [..., n, d], key [..., m, d],
   * value [..., m, dv] -> { output [..., n, dv], weights [..., n, m] | null }.
   */
  scaledDotProductAttention(query, key, value, opts) {
    const wasm = this.#runtime.enter('scaledDotProductAttention');
    checkTensor(query, 'query');
    checkTensor(key, 'key');
    checkTensor(value, 'value');
    opts = checkOptions(opts, SDPA_OPTIONS);
    const mask = checkMask(opts.attnMask, 'attnMask');
    const causal = checkCausal(opts.isCausal);
    const needWeights = checkBoolean(opts.needWeights, 'needWeights', false);
    // What is absent takes the core's SdpaOptions defaults; the ranges are its to check.
    const scale = opts.scale === undefined ? undefined : checkNumber(opts.scale, 'scale', { float32: true });
    const dropoutP = opts.dropoutP === undefined ? undefined : checkNumber(opts.dropoutP, 'dropoutP', { float32: true });
    // Without a seed each call draws differently, as torch's global generator would, yet reproducibly.
    const seed = opts.seed === undefined ? this.#defaultSeed++ : checkNumber(opts.seed, 'seed', { min: 0, max: Number.MAX_SAFE_INTEGER, integer: true });
    const enableGqa = checkBoolean(opts.enableGqa, 'enableGqa');
    const window = opts.window === undefined ? undefined : checkNumber(opts.window, 'window', { integer: true });
    const softcap = opts.softcap === undefined ? undefined : checkNumber(opts.softcap, 'softcap', { float32: true });
    const alibi = checkAlibi(opts.alibi);
    const documents = checkDocuments(opts);
    const out = checkOutArrays(opts.out, needWeights);

    const runtime = this.#runtime;
    runtime.checkRank(query.shape, 'query', '[..., n, d]');
    runtime.checkRank(key.shape, 'key', '[..., m, d]');
    runtime.checkRank(value.shape, 'value', '[..., m, dv]');
    if (mask) runtime.checkRank(mask.shape, 'attnMask', 'broadcastable to [..., n, m]');
    if (documents.queries) runtime.checkRank(documents.queries.shape, documents.shared ? 'documentIds' : 'queryDocumentIds', 'broadcastable to [..., n]');
    if (documents.keys) runtime.checkRank(documents.keys.shape, documents.shared ? 'documentIds' : 'keyDocumentIds', 'broadcastable to [..., m]');
    // The core's SdpaOptions, with its tensors at the given pointers (none while shapes are checked).
    const options = (at = {}) => ({
      attnMask: maskView(wasm, mask, at.mask),
      causal: wasm._Causal[causal]?.value,
      scale, dropoutP, seed, enableGqa, window, softcap,
      alibi: alibi.mode !== 0, alibiSlopes: at.slopes ?? 0, alibiSlopeCount: alibi.slopes ? alibi.slopes.length : 0,
      queryDocumentIds: idsView(documents.queries, at.queryIds),
      keyDocumentIds: idsView(documents.keys, at.keyIds),
      sharedDocumentIds: documents.shared,
    });
    throwIfFailed(wasm._sdpaCheck(tensorView(0, query), tensorView(0, key), tensorView(0, value), options()));
    const rows = query.shape.slice(0, -1);
    const [output, weights] = runtime.invoke(
      [[query.data, 'query'], [key.data, 'key'], [value.data, 'value'], [mask?.data, 'attnMask'], [alibi.slopes, 'alibi'],
        [documents.queries?.data, 'queryDocumentIds'], [documents.keys?.data, 'keyDocumentIds']],
      resultEntries(out, [...rows, value.shape.at(-1)], needWeights ? [...rows, key.shape.at(-2)] : null),
      ([q, k, v, m, slopes, queryIds, keyIds], [out, w]) =>
        wasm._sdpa(tensorView(q, query), tensorView(k, key), tensorView(v, value), options({ mask: m, slopes, queryIds, keyIds }), out, w),
    );
    return { output, weights };
  }

  /**
   * A transformer layer's feed-forward block in one call, its hidden activations kept in wasm
   * memory: down(act(gate(x)) · up(x)) with gate and up (Llama's MLP), down(act(up(x))) with up
   * alone (GPT-2's, BERT's), or down(act(g) · u) with gateUp, whose output rows hold g then u
   * (Phi-3's gate_up_proj). Each part a loaded Linear of this instance; x [..., inFeatures] →
   * [..., down.outFeatures]. opts.activation (required): config.json's hidden_act, 'silu', 'gelu'
   * (the erf form), 'gelu_new' or 'gelu_pytorch_tanh'; opts.out as Linear.forward's.
   */
  feedForward(x, parts, opts) {
    const runtime = this.#runtime, wasm = runtime.enter('feedForward');
    checkTensor(x, 'x');
    if (parts === null || typeof parts !== 'object') throw new AttentionError('parts', '{ gate, up, down }, { up, down } or { gateUp, down } of Linear modules', describe(parts));
    for (const name of Object.keys(parts))
      if (!FEED_FORWARD_PARTS.includes(name)) throw new AttentionError(`parts.${name}`, `no such part (${FEED_FORWARD_PARTS.join(', ')})`, describe(parts[name]));
    const handles = Object.fromEntries(FEED_FORWARD_PARTS.map((name) => [name, this.#linearHandle(parts[name], `parts.${name}`)]));
    opts = checkOptions(opts, ['activation', 'out']);
    const names = Object.keys(ACTIVATIONS);
    if (opts.activation === undefined) throw new AttentionError('activation', `one of ${names.map((name) => `'${name}'`).join(', ')} (config.json's hidden_act)`, 'none');
    const activation = wasm._Activation[ACTIVATIONS[checkChoice(opts.activation, 'activation', names)]];
    runtime.checkRank(x.shape, 'x', '[..., inFeatures]');
    const given = { ...handles, activation };
    return forward(runtime, () => wasm._feedForwardCheck(given, tensorView(0, x)), [[x.data, 'x']],
      ([input], out) => wasm._feedForward(given, tensorView(input, x), out), undefined, { output: opts.out }, 'out').output;
  }

  // A feedForward part's core handle: 0 when absent; a Linear of this instance, not disposed.
  #linearHandle(value, argument) {
    if (value === undefined || value === null) return 0;
    if (!(value instanceof this.Linear)) throw new AttentionError(argument, 'a Linear of this instance', describe(value));
    const { runtime, entry, handle } = internals.get(value);
    if (!runtime.owns(entry)) throw new AttentionError(argument, 'a Linear that is not disposed', 'a disposed Linear', { code: 'DISPOSED' });
    return handle;
  }

  /**
   * Rotary position embedding of x [..., L, d]: a new tensor of the same shape. Angles
   * pos · inv_freq[k] (base^(−2k/r) unless ropeScaling or invFreq say otherwise) are computed in
   * double precision. positions: [L], or [N, L] for x [N, ..., L, d].
   */
  rope(x, opts) {
    const wasm = this.#runtime.enter('rope');
    checkTensor(x, 'x');
    opts = checkOptions(opts, ROPE_OPTIONS);
    const positions = checkPositions(opts.positions);
    if (positions && opts.offset !== undefined)
      throw new AttentionError('offset', 'no offset when positions are given', describe(opts.offset));
    // What is absent takes the core's RopeOptions defaults; the ranges are its to check.
    const offset = opts.offset === undefined ? undefined : checkNumber(opts.offset, 'offset', { min: -(2 ** 52), max: 2 ** 52, integer: true });
    const base = opts.base === undefined ? undefined : checkNumber(opts.base, 'base');
    const rotaryDim = opts.rotaryDim === undefined ? undefined : checkNumber(opts.rotaryDim, 'rotaryDim', { integer: true });
    const interleaved = checkBoolean(opts.interleaved, 'interleaved');
    const scheme = checkRopeScheme(wasm, opts);

    const runtime = this.#runtime;
    runtime.checkRank(x.shape, 'x', '[..., L, d]');
    // The core's RopeOptions: positions and the scheme's tables at `at`; no positions: offset, offset + 1, …
    const options = (at = {}) => ({
      positions: idsView(positions, at.positions), offset, base, rotaryDim, interleaved, scaling: ropeScalingStruct(wasm, scheme, at.tables),
    });
    throwIfFailed(wasm._ropeCheck(tensorView(0, x), options()));
    const [output] = runtime.invoke(
      [[x.data, 'x'], [positions?.data, 'positions'], [scheme.tables, 'ropeScaling']],
      [[x.shape, 'output', 0]],
      ([input, at, tables], [out]) => wasm._rope(tensorView(input, x), options({ positions: at, tables }), out),
    );
    return output;
  }
}

keepClassNames({ Attention });

// `using attn = await init()` ends the instance with its scope.
Attention.prototype[disposeSymbol] = Attention.prototype.dispose;
