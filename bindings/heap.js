// Wasm memory for one call: inputs are copied in once, outputs copied out once, and everything is
// freed whatever happens, so failing calls never grow the heap.
import { AttentionError } from './errors.js';
import { MAX_BYTES } from './validate.js';

// The current heap. With threads a worker may grow memory, leaving the main thread's HEAP* views
// stale until Emscripten next looks, so the threaded build's memory object is asked directly.
export function heapBuffer(wasm) {
  return (wasm.wasmMemory ?? wasm.HEAPU8).buffer;
}

export class HeapScope {
  #wasm;
  #pointers = [];

  constructor(wasm) {
    this.#wasm = wasm;
  }

  // `what` names the buffer in the out-of-memory error.
  alloc(bytes, what) {
    // _malloc takes an i32: a larger request would wrap around, so refuse it here.
    const pointer = bytes <= MAX_BYTES ? this.#wasm._malloc(Math.max(bytes, 1)) : 0;
    if (!pointer) throw new AttentionError(what, 'memory for the inputs and results', `${bytes} bytes of wasm memory`, { code: 'OUT_OF_MEMORY' });
    this.#pointers.push(pointer);
    return pointer;
  }

  copyIn(array, what) {
    const pointer = this.alloc(array.byteLength, what);
    new Uint8Array(heapBuffer(this.#wasm), pointer, array.byteLength).set(
      new Uint8Array(array.buffer, array.byteOffset, array.byteLength),
    );
    return pointer;
  }

  // A JS-owned copy: memory growth or a later call cannot change it. Into the start of `into` when
  // given (an array the caller reuses: no fresh memory to fault in), else a new array.
  copyOutFloats(pointer, length, into = null) {
    const view = new Float32Array(heapBuffer(this.#wasm), pointer, length);
    if (!into) return view.slice();
    into.set(view);
    return into.length === length ? into : into.subarray(0, length);
  }

  /**
   * The `length` floats at `pointer` (allocated here) left out of free(): → { data, shape,
   * release() }, `data` a view made when read (a view made before memory grew may be detached),
   * release() freeing them (once).
   */
  lend(pointer, length, shape) {
    this.#pointers = this.#pointers.filter((kept) => kept !== pointer);
    const wasm = this.#wasm;
    let held = true;
    return {
      shape,
      get data() {
        return new Float32Array(heapBuffer(wasm), pointer, length);
      },
      release() {
        if (held) wasm._free(pointer);
        held = false;
      },
    };
  }

  free() {
    for (const pointer of this.#pointers) this.#wasm._free(pointer);
    this.#pointers = [];
  }
}
