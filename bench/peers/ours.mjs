// ours-simd / ours-scalar: the package's MultiheadAttention, as users call it.
// `import { init } from 'attention-wasm'` resolves to dist/index.mjs (package.json "exports"); the
// bench has its own package.json, so Node's self-reference cannot reach it from here.
import { init } from '../../dist/index.mjs';
import { E, H, stateDict } from '../problem.mjs';

/** Loads one build (`{ threads, simd }` as init takes them) with the bench's weights. */
export async function loadOurs(opts) {
  const attn = await init(opts);
  const mha = new attn.MultiheadAttention(E, H).loadStateDict(stateDict());
  return {
    attn,
    features: attn.features,
    /**
     * A forward over x [L, 1, E], returning the output data: causal self-attention, or the
     * `masks` given (forward's isCausal, keyPaddingMask, attnMask).
     */
    runner(x, L, needWeights, masks = { isCausal: true }) {
      const query = { data: x, shape: [L, 1, E] };
      return () => mha.forward(query, null, null, { ...masks, needWeights }).output.data;
    },
    masks: attn.masks,
    dispose() {
      mha.dispose();
    },
  };
}

/**
 * The memory row of --large: a fresh instance, the streaming (weights-off) path at `L`; the growth
 * of the wasm heap across the forward, as stats() reports it.
 */
export async function heapGrowth(L, x) {
  const ours = await loadOurs({ threads: 1, relaxedSimd: false });
  const before = ours.attn.stats().wasmHeapBytes;
  const start = performance.now();
  ours.runner(x, L, false)();
  const ms = performance.now() - start;
  const after = ours.attn.stats().wasmHeapBytes;
  ours.dispose();
  return { before, after, ms };
}
