// The public API (see API-CONTRACT.md): init() and the Attention instance it returns. Embind is a
// private layer below this file; everything users touch is validated here first.
import { AttentionError, describe, shapeString } from './errors.js';
import { HeapScope, heapBuffer } from './heap.js';
import { chooseBuild, instantiate } from './loader.js';
import { checkBoolean, checkMask, checkNumber, checkOptions, checkTensor } from './validate.js';

export { AttentionError };

// Replaced with package.json's version when the bundle is built.
const VERSION = typeof __ATTENTION_VERSION__ === 'string' ? __ATTENTION_VERSION__ : '0.0.0-dev';

const MASK_TYPE = { none: 0, boolean: 1, additive: 2 };
const SDPA_OPTIONS = ['attnMask', 'isCausal', 'scale', 'dropoutP', 'seed', 'needWeights'];

/**
 * Loads the fastest build this engine runs and returns an independent instance.
 * @param {{ threads?: number, simd?: boolean, wasmBaseUrl?: string | URL }} [opts]
 */
export async function init(opts) {
  opts = checkOptions(opts, ['threads', 'simd', 'wasmBaseUrl']);
  const allowSimd = checkBoolean(opts.simd, 'simd', true);
  const threads = opts.threads === undefined ? 1 : checkNumber(opts.threads, 'threads', { min: 1, max: 64, integer: true });
  if (opts.wasmBaseUrl !== undefined && typeof opts.wasmBaseUrl !== 'string' && !(opts.wasmBaseUrl instanceof URL))
    throw new AttentionError('wasmBaseUrl', 'a string or URL', describe(opts.wasmBaseUrl));
  const build = await chooseBuild({ threads, allowSimd });
  const wasm = await instantiate(build, { threads, wasmBaseUrl: opts.wasmBaseUrl });
  // Builds without threads report 1 whatever was asked.
  const threadsInUse = wasm._setThreadCount(threads);
  return new Attention(wasm, { simd: build !== 'scalar', threads: threadsInUse, version: VERSION });
}

function maskType(mask) {
  if (!mask) return MASK_TYPE.none;
  return mask.data instanceof Uint8Array ? MASK_TYPE.boolean : MASK_TYPE.additive;
}

// Statuses come back from the core as plain objects (or null for success).
function throwIfFailed(status) {
  if (status) {
    throw new AttentionError(status.argument, status.expected, status.got, {
      code: status.outOfMemory ? 'OUT_OF_MEMORY' : 'INVALID_ARGUMENT',
    });
  }
}

class Attention {
  #wasm;
  #shapes; // int32 block: per tensor, its rank then maxRank dimension slots (see embind.cpp)
  #defaultSeed = 0;

  constructor(wasm, features) {
    this.#wasm = wasm;
    this.#shapes = wasm._malloc(4 * 4 * (1 + wasm._maxRank));
    this.features = Object.freeze(features);
    Object.freeze(this);
  }

  /** Heap size of this instance and the number of modules not yet disposed. */
  stats() {
    return { wasmHeapBytes: heapBuffer(this.#wasm).byteLength, liveObjects: 0 };
  }

  // entries: [shape, argument, what the shape should look like]. Ranks past the slots are refused
  // here; everything else about shapes is the core's to check.
  #writeShapes(entries) {
    const maxRank = this.#wasm._maxRank;
    const slots = 1 + maxRank;
    entries.forEach(([shape, argument, pattern], index) => {
      if (shape.length > maxRank) throw new AttentionError(argument, `rank at most ${maxRank} (${pattern})`, shapeString(shape));
      const block = new Int32Array(heapBuffer(this.#wasm), this.#shapes + index * slots * 4, slots);
      block[0] = shape.length;
      block.set(shape, 1);
    });
  }

  /**
   * torch.nn.functional.scaled_dot_product_attention. query [..., n, d], key [..., m, d],
   * value [..., m, dv] -> { output [..., n, dv], weights [..., n, m] | null }.
   */
  scaledDotProductAttention(query, key, value, opts) {
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

    const wasm = this.#wasm;
    this.#writeShapes([
      [query.shape, 'query', '[..., n, d]'],
      [key.shape, 'key', '[..., m, d]'],
      [value.shape, 'value', '[..., m, dv]'],
      [mask ? mask.shape : [], 'attnMask', 'broadcastable to [..., n, m]'],
    ]);
    throwIfFailed(wasm._sdpaCheck(this.#shapes, maskType(mask), isCausal, scale, dropoutP));

    const rows = query.shape.slice(0, -1);
    const outputShape = [...rows, value.shape.at(-1)];
    const weightsShape = [...rows, key.shape.at(-2)];
    const outputLength = outputShape.reduce((a, b) => a * b, 1);
    const weightsLength = weightsShape.reduce((a, b) => a * b, 1);
    const heap = new HeapScope(wasm);
    try {
      const q = heap.copyIn(query.data, 'query');
      const k = heap.copyIn(key.data, 'key');
      const v = heap.copyIn(value.data, 'value');
      const m = mask ? heap.copyIn(mask.data, 'attnMask') : 0;
      const out = heap.alloc(outputLength * 4, 'output');
      const w = needWeights ? heap.alloc(weightsLength * 4, 'weights') : 0;
      throwIfFailed(wasm._sdpa(this.#shapes, q, k, v, maskType(mask), m, isCausal, scale, dropoutP, seed, out, w));
      return {
        output: { data: heap.copyOutFloats(out, outputLength), shape: outputShape },
        weights: needWeights ? { data: heap.copyOutFloats(w, weightsLength), shape: weightsShape } : null,
      };
    } finally {
      heap.free();
    }
  }
}
