// One wasm instance as the JS layer sees it: the shapes block, the call protocol (shape check,
// copy in once, run, copy out once, free), the objects it owns in wasm memory, and its end.
import { AttentionError, shapeString } from './errors.js';
import { HeapScope, heapBuffer } from './heap.js';
import { unload } from './loader.js';
import { LEND, numel } from './validate.js';

// Symbol.dispose where the engine has it, else the symbol esbuild's and TypeScript's lowered
// `using` look up.
export const disposeSymbol = Symbol.dispose ?? Symbol.for('Symbol.dispose');

// Frees the wasm side of an owned object whose JS object was collected first (see own()).
const collected = new FinalizationRegistry((entry) => entry.runtime.free(entry));

// Statuses come back from the core as plain objects (or null for success).
export function throwIfFailed(status) {
  if (status) {
    throw new AttentionError(status.argument, status.expected, status.got, {
      code: status.outOfMemory ? 'OUT_OF_MEMORY' : 'INVALID_ARGUMENT',
    });
  }
}

function maskKind(mask) {
  if (!mask) return 'none';
  return mask.data instanceof Uint8Array ? 'boolean' : 'additive';
}

// The core's views as the structs that cross Embind take them: a tensor, a mask and ids at
// `pointer` in wasm memory (0 for calls that check shapes only), with their shapes. A boolean
// mask's 1 means masked out (`trueMeansMasked`) or may attend, as the function it goes to says.
export function tensorView(pointer, tensor) {
  return { data: pointer ?? 0, shape: tensor.shape };
}

export function maskView(wasm, mask, pointer, trueMeansMasked = false) {
  return { type: wasm._MaskType[maskKind(mask)], data: pointer ?? 0, shape: mask ? mask.shape : [], trueMeansMasked };
}

export function idsView(ids, pointer) {
  return { data: pointer ?? 0, shape: ids ? ids.shape : [] };
}

export class Runtime {
  #wasm;
  #build;
  // Entries of the objects alive in wasm memory: { runtime, release }.
  #owned = new Set();

  constructor(wasm, build) {
    this.#wasm = wasm;
    this.#build = build;
    this.maxRank = wasm._maxRank;
  }

  /**
   * The wasm module, for the entry point `call` (named in the error): every entry point asks here
   * first, so that after dispose() each throws an AttentionError rather than a TypeError or a trap.
   */
  enter(call) {
    if (!this.#wasm) {
      throw new AttentionError(call, 'an instance that is not disposed', `attn (disposed instance of build '${this.#build}')`, {
        code: 'DISPOSED',
      });
    }
    return this.#wasm;
  }

  heapBytes() {
    return heapBuffer(this.#wasm).byteLength;
  }

  /** Objects in wasm memory not yet freed (stats().liveObjects). */
  get liveObjects() {
    return this.#owned.size;
  }

  /**
   * Records an object in wasm memory that `target` (a module, a cache) stands for; `release(wasm)`
   * frees it. It is freed by free(entry), by the FinalizationRegistry once `target` is collected,
   * or by dispose(), whichever comes first. `release` must not hold `target`, or it is never
   * collected. Returns the entry, the key to free() and owns().
   */
  own(target, release) {
    const entry = { runtime: this, release };
    this.#owned.add(entry);
    collected.register(target, entry, entry);
    return entry;
  }

  owns(entry) {
    return this.#owned.has(entry);
  }

  /** Frees an owned object now; does nothing if it already was (or the instance is disposed). */
  free(entry) {
    if (!this.#owned.delete(entry)) return;
    collected.unregister(entry);
    entry.release(this.#wasm);
  }

  /**
   * Ends the instance: frees what it owns, terminates its pthread workers and lets go of the wasm
   * module, so that its memory can be collected even while users still hold `attn` or its modules.
   * Later calls throw (enter()); a second dispose() does nothing.
   */
  dispose() {
    if (!this.#wasm) return;
    for (const entry of this.#owned) this.free(entry);
    // The pool's threads are joined first: Emscripten frees the stack of a thread it terminates
    // before the worker stops, so a thread still starting up would trap, and the worker's error
    // would reach the process as an uncaught exception. Joined, only idle workers are terminated.
    this.#wasm._setThreadCount(1);
    unload(this.#wasm);
    this.#wasm = null;
  }

  // Refuses shapes past the core's rank, naming the argument and what it should look like
  // (`pattern`); everything else about shapes is the core's to check.
  checkRank(shape, argument, pattern) {
    if (shape.length > this.maxRank)
      throw new AttentionError(argument, `rank at most ${this.maxRank} (${pattern})`, shapeString(shape));
  }

  // Copies `inputs` ([typed array or null, name]) into the heap, allocates float32 outputs
  // ([shape or null, name, index of an input it may overwrite]), runs
  // `call(inputPointers, outputPointers)` and returns the outputs as JS-owned tensors (null where
  // no shape was given). Everything is freed on every path.
  invoke(inputs, outputs, call) {
    const heap = new HeapScope(this.#wasm);
    try {
      // Self-attention passes one array as query, key and value: it is copied once.
      const copied = new Map();
      const inputPointers = inputs.map(([array, what]) => {
        if (!array) return 0;
        if (!copied.has(array)) copied.set(array, heap.copyIn(array, what));
        return copied.get(array);
      });
      // An output naming an input of its own size goes over that input's copy (for modules that
      // allow their output over that input): one buffer less in the heap.
      const outputPointers = outputs.map(([shape, what, overInput]) => {
        if (!shape) return 0;
        const bytes = numel(shape) * 4;
        const input = inputs[overInput]?.[0];
        return input?.byteLength === bytes ? inputPointers[overInput] : heap.alloc(bytes, what);
      });
      throwIfFailed(call(inputPointers, outputPointers, heap));
      // Each output is copied out of the heap: into the caller's array when it gave one (`into`,
      // checked for its length), else a new one; or lent where the caller asked (LEND).
      return outputs.map(([shape, , , into], i) => {
        if (!shape) return null;
        if (into === LEND) return heap.lend(outputPointers[i], numel(shape), shape);
        return { data: heap.copyOutFloats(outputPointers[i], numel(shape), into), shape };
      });
    } finally {
      heap.free();
    }
  }
}
