// The public API (see API-CONTRACT.md): init() and the Attention instance it returns. Embind is a
// private layer below; everything users touch is validated here and in the modules it imports.
import { AttentionError } from './errors.js';
import { checkWasmBaseUrl, checkWasmBinary, load } from './loader.js';
import { createMasks } from './masks.js';
import { createModuleClasses } from './modules.js';
import { disposeSymbol, maskType, Runtime, throwIfFailed } from './runtime.js';
import { checkBoolean, checkMask, checkNumber, checkOptions, checkTensor } from './validate.js';

export { AttentionError };

// Replaced with package.json's version when the bundle is built.
const VERSION = typeof __ATTENTION_VERSION__ === 'string' ? __ATTENTION_VERSION__ : '0.0.0-dev';

const SDPA_OPTIONS = ['attnMask', 'isCausal', 'scale', 'dropoutP', 'seed', 'needWeights'];

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
    Object.assign(this, createModuleClasses(runtime));
    Object.freeze(this);
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
    const isCausal = checkBoolean(opts.isCausal, 'isCausal', false);
    const needWeights = checkBoolean(opts.needWeights, 'needWeights', false);
    const scale = opts.scale === undefined ? NaN : checkNumber(opts.scale, 'scale', { float32: true });
    const dropoutP = opts.dropoutP === undefined ? 0 : checkNumber(opts.dropoutP, 'dropoutP', { min: 0, max: 1, maxExclusive: true, float32: true });
    // Without a seed each call draws differently, as torch's global generator would, yet reproducibly.
    const seed = opts.seed === undefined ? this.#defaultSeed++ : checkNumber(opts.seed, 'seed', { min: 0, max: Number.MAX_SAFE_INTEGER, integer: true });

    const runtime = this.#runtime;
    const shapes = runtime.writeShapes([
      [query.shape, 'query', '[..., n, d]'],
      [key.shape, 'key', '[..., m, d]'],
      [value.shape, 'value', '[..., m, dv]'],
      [mask ? mask.shape : [], 'attnMask', 'broadcastable to [..., n, m]'],
    ]);
    const status = wasm._sdpaCheck(shapes, maskType(mask), isCausal, scale, dropoutP);
    throwIfFailed(status);
    const rows = query.shape.slice(0, -1);
    const [output, weights] = runtime.invoke(
      [[query.data, 'query'], [key.data, 'key'], [value.data, 'value'], [mask?.data, 'attnMask']],
      [[[...rows, value.shape.at(-1)], 'output'], [needWeights ? [...rows, key.shape.at(-2)] : null, 'weights']],
      ([q, k, v, m], [out, w]) => wasm._sdpa(shapes, q, k, v, maskType(mask), m, isCausal, scale, dropoutP, seed, out, w),
    );
    return { output, weights };
  }
}

// `using attn = await init()` ends the instance with its scope.
Attention.prototype[disposeSymbol] = Attention.prototype.dispose;
