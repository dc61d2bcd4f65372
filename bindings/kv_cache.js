// KVCache: keys and values held in wasm memory between decode steps (kv_cache.h). Each instance of
// init() gets its own class, bound to its own wasm instance.
import { AttentionError, describe, keepClassNames } from './errors.js';
import { adopt, expose, internals, live, release } from './owned.js';
import { HeapScope, heapBuffer } from './heap.js';
import { disposeSymbol, maskView, tensorView, throwIfFailed } from './runtime.js';
import {
  checkAlibi, checkBoolean, checkChoice, checkMask, checkNumber, checkOptions, checkOutArrays, checkPositive, checkTensor, checkTokenMask, MAX_DIM, resultEntries,
} from './validate.js';

const CONFIG = ['batch', 'heads', 'headDim', 'valueDim', 'maxLength', 'dtype', 'window'];
const ATTEND_OPTIONS = ['isCausal', 'scale', 'softcap', 'alibi', 'window', 'attnMask', 'needWeights', 'out'];
const DTYPES = ['f32', 'f16', 'q8'];

function checkSize(value, argument) {
  return checkNumber(value, argument, { min: 1, max: MAX_DIM, integer: true });
}

/**
 * The core handle of `cache` for a call of `runtime`'s instance: a KVCache of the same instance,
 * not disposed. `argument` names it in errors.
 */
export function cacheHandle(cache, runtime, argument) {
  const state = cache === null || typeof cache !== 'object' ? undefined : internals.get(cache);
  if (state?.name === 'KVCache' && state.runtime !== runtime)
    throw new AttentionError(argument, "a KVCache of this instance (make it with this instance's KVCache or createCache())", 'a KVCache of another init() instance');
  if (!state || state.name !== 'KVCache')
    throw new AttentionError(argument, 'a KVCache of this instance', describe(cache));
  return live(cache, 'use').state.handle;
}

export function createKVCacheClass(runtime) {
  class KVCache {
    /**
     * { batch = 1, heads, headDim, valueDim = headDim, maxLength, dtype = 'f32' (or 'f16', 'q8'),
     * window }: storage for `maxLength` positions (with a window, a ring of the latest positions
     * that grows to hold window − 1 + t when t are appended at once; maxLength is then only the
     * first reservation).
     */
    constructor(opts) {
      const wasm = runtime.enter('new KVCache');
      if (opts === null || typeof opts !== 'object' || Array.isArray(opts))
        throw new AttentionError('opts', '{ heads, headDim, maxLength, ... }', describe(opts));
      checkOptions(opts, CONFIG);
      const batch = opts.batch === undefined ? 1 : checkSize(opts.batch, 'batch');
      const heads = checkSize(opts.heads, 'heads');
      const headDim = checkSize(opts.headDim, 'headDim');
      const valueDim = opts.valueDim === undefined ? headDim : checkSize(opts.valueDim, 'valueDim');
      const maxLength = checkSize(opts.maxLength, 'maxLength');
      const dtype = checkChoice(opts.dtype, 'dtype', DTYPES, 'f32');
      const window = opts.window === undefined || opts.window === null ? null : checkSize(opts.window, 'window');
      const handle = wasm._cacheCreate({ batch, heads, headDim, valueDim, maxLength, dtype: wasm._CacheDtype[dtype], window: window ?? undefined });
      adopt(this, runtime, 'KVCache', handle, (w, h) => w._cacheDestroy(h));
      expose(this, { batch, heads, headDim, valueDim, maxLength, dtype, window });
    }

    /** Positions held. */
    get length() {
      const { state, wasm } = live(this, 'length');
      return wasm._cacheLength(state.handle);
    }

    /** Positions appended since creation or reset(), minus those truncated. */
    get position() {
      const { state, wasm } = live(this, 'position');
      return wasm._cachePosition(state.handle);
    }

    /**
     * Appends key [batch, heads, t, headDim] and value [batch, heads, t, valueDim]. opts.mask:
     * Hugging Face's attention_mask of these positions, [batch, t] (1 a token, 0 padding), kept so
     * that attend() hides padded keys. An f16 cache refuses a finite value past binary16's range,
     * a q8 cache a value its block's binary16 scale cannot hold (the core names where it is).
     * Returns this.
     */
    append(key, value, opts) {
      const { state, wasm } = live(this, 'append');
      checkTensor(key, 'key');
      checkTensor(value, 'value');
      opts = checkOptions(opts, ['mask']);
      const mask = checkTokenMask(opts.mask, 'mask');
      runtime.checkRank(key.shape, 'key', '[batch, heads, t, headDim]');
      runtime.checkRank(value.shape, 'value', '[batch, heads, t, valueDim]');
      if (mask) runtime.checkRank(mask.shape, 'mask', '[batch, t]');
      throwIfFailed(wasm._cacheAppendCheck(state.handle, tensorView(0, key), tensorView(0, value), maskView(wasm, mask)));
      runtime.invoke([[key.data, 'key'], [value.data, 'value'], [mask?.data, 'mask']], [], ([k, v, m]) =>
        wasm._cacheAppend(state.handle, tensorView(k, key), tensorView(v, value), maskView(wasm, mask, m)));
      return this;
    }

    /**
     * Attention of query [batch, Hq, n, headDim] (the latest n positions) over every position held:
     * { output [batch, Hq, n, valueDim], weights [batch, Hq, n, length] | null }.
     */
    attend(query, opts) {
      const { state, wasm } = live(this, 'attend');
      checkTensor(query, 'query');
      opts = checkOptions(opts, ATTEND_OPTIONS);
      const causal = checkBoolean(opts.isCausal, 'isCausal', true);
      const scale = opts.scale === undefined ? undefined : checkNumber(opts.scale, 'scale', { float32: true });
      const softcap = opts.softcap === undefined ? undefined : checkPositive(opts.softcap, 'softcap');
      const alibi = checkAlibi(opts.alibi);
      const window = opts.window === undefined ? undefined : checkSize(opts.window, 'window');
      const mask = checkMask(opts.attnMask, 'attnMask');
      const needWeights = checkBoolean(opts.needWeights, 'needWeights', false);
      const out = checkOutArrays(opts.out, needWeights);
      runtime.checkRank(query.shape, 'query', '[batch, Hq, n, headDim]');
      if (mask) runtime.checkRank(mask.shape, 'attnMask', 'broadcastable to [batch, Hq, n, length]');
      // The core's CacheAttendOptions, with the mask and slopes at the given pointers.
      const options = (at = {}) => ({
        causal, scale, softcap, window,
        alibi: alibi.mode !== 0, alibiSlopes: at.slopes ?? 0, alibiSlopeCount: alibi.slopes ? alibi.slopes.length : 0,
        attnMask: maskView(wasm, mask, at.mask),
      });
      const result = wasm._cacheAttendCheck(state.handle, tensorView(0, query), options());
      if (!result || result.output === undefined) throwIfFailed(result);
      const [output, weights] = runtime.invoke(
        [[query.data, 'query'], [mask?.data, 'attnMask'], [alibi.slopes, 'alibi']],
        resultEntries(out, result.output, needWeights ? result.weights : null),
        ([q, m, slopes], [out, w]) => wasm._cacheAttend(state.handle, tensorView(q, query), options({ mask: m, slopes }), out, w),
      );
      return { output, weights };
    }

    /**
     * Keeps the oldest `length` positions held, dropping the latest (rollback). A ring that has
     * dropped positions keeps at least window − 1 (the core refuses less). Returns this.
     */
    truncate(length) {
      const { state, wasm } = live(this, 'truncate');
      checkNumber(length, 'length', { min: 0, max: MAX_DIM, integer: true });
      throwIfFailed(wasm._cacheTruncate(state.handle, length));
      return this;
    }

    /** Empties the cache (length and position 0), keeping its memory. Returns this. */
    reset() {
      const { state, wasm } = live(this, 'reset');
      wasm._cacheReset(state.handle);
      return this;
    }

    /** The held keys as float32 [batch, heads, length, headDim], oldest first. */
    keys() {
      return this.#copy('keys', this.headDim, (wasm, handle, out) => wasm._cacheKeys(handle, out));
    }

    /** The held values as float32 [batch, heads, length, valueDim], oldest first. */
    values() {
      return this.#copy('values', this.valueDim, (wasm, handle, out) => wasm._cacheValues(handle, out));
    }

    /** The held attention mask as { data: Uint8Array, shape: [batch, length] } (1 a token, 0 padding), oldest first. */
    mask() {
      const { state, wasm } = live(this, 'mask');
      const length = wasm._cacheLength(state.handle);
      const heap = new HeapScope(wasm);
      try {
        const pointer = heap.alloc(this.batch * length, 'mask');
        wasm._cacheMask(state.handle, pointer);
        return { data: new Uint8Array(heapBuffer(wasm), pointer, this.batch * length).slice(), shape: [this.batch, length] };
      } finally {
        heap.free();
      }
    }

    #copy(method, width, read) {
      const { state, wasm } = live(this, method);
      const shape = [this.batch, this.heads, wasm._cacheLength(state.handle), width];
      return runtime.invoke([], [[shape, method]], (_, [out]) => read(wasm, state.handle, out))[0];
    }

    /** Frees the cache's wasm memory now. Safe to call twice; later use throws. */
    dispose() {
      release(this);
    }

    [disposeSymbol]() {
      this.dispose();
    }
  }

  return keepClassNames({ KVCache }).KVCache;
}
