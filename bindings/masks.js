// attn.masks: builders for the masks PyTorch users write by hand. Boolean results are Uint8Array
// with 1 = masked (the MultiheadAttention polarity); merge() is the core's own merge rule.
import { AttentionError, describe } from './errors.js';
import { checkMask, checkNumber, MAX_DIM } from './validate.js';
import { maskView, throwIfFailed } from './runtime.js';

function checkDim(value, argument) {
  return checkNumber(value, argument, { min: 0, max: MAX_DIM, integer: true });
}

function checkLengths(lengths, maxLen) {
  const isList = Array.isArray(lengths) || (ArrayBuffer.isView(lengths) && !(lengths instanceof DataView));
  if (!isList) throw new AttentionError('lengths', `an array of integers in [0, ${maxLen}]`, describe(lengths));
  Array.from(lengths).forEach((length, i) => checkNumber(length, `lengths[${i}]`, { min: 0, max: maxLen, integer: true }));
  return Array.from(lengths);
}

// Fills a Uint8Array of `count` cells with masked(index...) over the given dims.
function build(shape, masked) {
  const data = new Uint8Array(shape.reduce((a, b) => a * b, 1));
  const [rows, cols] = shape.slice(-2);
  for (let plane = 0; plane < data.length / (rows * cols || 1); ++plane)
    for (let i = 0; i < rows; ++i)
      for (let j = 0; j < cols; ++j) data[(plane * rows + i) * cols + j] = masked(plane, i, j) ? 1 : 0;
  return { data, shape };
}

// The builders that need no wasm still ask the runtime first, so that after dispose() they throw
// like every other entry point.
export function createMasks(runtime) {
  return Object.freeze({
    /** [n, m], 1 where key j > query i: not allowed (MultiheadAttention's attnMask polarity). */
    causal(n, m = n) {
      runtime.enter('masks.causal');
      checkDim(n, 'n');
      checkDim(m, 'm');
      return build([n, m], (_, i, j) => j > i);
    },
    /** [N, maxLen], 1 where position j >= lengths[b]: padding. */
    keyPadding(lengths, maxLen) {
      runtime.enter('masks.keyPadding');
      checkDim(maxLen, 'maxLen');
      const valid = checkLengths(lengths, maxLen);
      return build([valid.length, maxLen], (_, b, j) => j >= valid[b]);
    },
    /** [N, maxLen, maxLen], 1 where query i or key j is padding. */
    padding2d(lengths, maxLen) {
      runtime.enter('masks.padding2d');
      checkDim(maxLen, 'maxLen');
      const valid = checkLengths(lengths, maxLen);
      return build([valid.length, maxLen, maxLen], (b, i, j) => i >= valid[b] || j >= valid[b]);
    },
    /**
     * The single additive mask MultiheadAttention applies: float [N*numHeads, n, m] (n = 1 when
     * attnMask is null), -Infinity where masked.
     */
    merge(attnMask, keyPaddingMask, numHeads) {
      const wasm = runtime.enter('masks.merge');
      const am = checkMask(attnMask, 'attnMask');
      const kpm = checkMask(keyPaddingMask, 'keyPaddingMask');
      checkNumber(numHeads, 'numHeads', { min: 1, max: MAX_DIM, integer: true });
      if (am) runtime.checkRank(am.shape, 'attnMask', '[n, m] or [N*numHeads, n, m]');
      if (kpm) runtime.checkRank(kpm.shape, 'keyPaddingMask', '[N, m]');
      // The core's MergeMasksOptions (the key padding mask is its to require).
      const options = (a, k) => ({ attnMask: maskView(wasm, am, a, true), keyPaddingMask: maskView(wasm, kpm, k, true), heads: numHeads });
      const merged = wasm._mergeCheck(options());
      if (!Array.isArray(merged)) throwIfFailed(merged);
      const [result] = runtime.invoke(
        [[am?.data, 'attnMask'], [kpm?.data, 'keyPaddingMask']],
        [[merged, 'merged mask']],
        ([a, k], [out]) => wasm._merge(options(a, k), out),
      );
      return result;
    },
  });
}
