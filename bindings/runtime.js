// One wasm instance as the JS layer sees it: the shapes block, the call protocol (shape check,
// copy in once, run, copy out once, free) and the count of live modules.
import { AttentionError, shapeString } from './errors.js';
import { HeapScope, heapBuffer } from './heap.js';
import { numel } from './validate.js';

const MASK_TYPE = { none: 0, boolean: 1, additive: 2 };

// Statuses come back from the core as plain objects (or null for success).
export function throwIfFailed(status) {
  if (status) {
    throw new AttentionError(status.argument, status.expected, status.got, {
      code: status.outOfMemory ? 'OUT_OF_MEMORY' : 'INVALID_ARGUMENT',
    });
  }
}

export function maskType(mask) {
  if (!mask) return MASK_TYPE.none;
  return mask.data instanceof Uint8Array ? MASK_TYPE.boolean : MASK_TYPE.additive;
}

const SHAPE_SLOTS = 6; // the most any entry point takes: query, key, value, a mask and two id tensors

export class Runtime {
  liveObjects = 0;

  constructor(wasm) {
    this.wasm = wasm;
    this.maxRank = wasm._maxRank;
    this.shapes = wasm._malloc(SHAPE_SLOTS * 4 * (1 + this.maxRank));
  }

  heapBytes() {
    return heapBuffer(this.wasm).byteLength;
  }

  // Writes shapes into `base` (the shared block unless given): entries are [shape, argument,
  // what it should look like]. Ranks past the slots are refused here; everything else about shapes
  // is the core's to check.
  writeShapes(entries, base = this.shapes) {
    const slots = 1 + this.maxRank;
    entries.forEach(([shape, argument, pattern], index) => {
      if (shape.length > this.maxRank)
        throw new AttentionError(argument, `rank at most ${this.maxRank} (${pattern})`, shapeString(shape));
      const block = new Int32Array(heapBuffer(this.wasm), base + index * slots * 4, slots);
      block[0] = shape.length;
      block.set(shape, 1);
    });
    return base;
  }

  // Copies `inputs` ([typed array or null, name]) into the heap, allocates float32 outputs
  // ([shape or null, name, index of an input it may overwrite]), runs
  // `call(inputPointers, outputPointers)` and returns the outputs as JS-owned tensors (null where
  // no shape was given). Everything is freed on every path.
  invoke(inputs, outputs, call) {
    const heap = new HeapScope(this.wasm);
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
      return outputs.map(([shape], i) => (shape ? { data: heap.copyOutFloats(outputPointers[i], numel(shape)), shape } : null));
    } finally {
      heap.free();
    }
  }
}
