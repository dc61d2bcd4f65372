// Attention for the families whose projections are their own (GPT-2, BERT): q, k and v rows split
// into heads, scaledDotProductAttention, HF's head_mask on the weights, heads merged back.
import { mergeHeads, scaleHeads, splitHeads } from './ops.js';

/**
 * The attention mask a call's padding needs, for scaledDotProductAttention: boolean [N, 1, t, t]
 * (1 = may attend), keys that are padding hidden (and later keys for a causal model); null
 * without padding.
 */
function paddingMask(attentionMask, n, t, causal) {
  if (!attentionMask) return null;
  const data = new Uint8Array(n * t * t);
  for (let b = 0; b < n; b++)
    for (let i = 0; i < t; i++)
      for (let j = 0; j < (causal ? i + 1 : t); j++) data[(b * t + i) * t + j] = attentionMask[b * t + j];
  return { data, shape: [n, 1, t, t] };
}

/**
 * Attention over q, k, v rows [N · t, heads · d] (each a slice of wider rows: { data, rowWidth,
 * offset }), as ctx asks (model.js): → { output [N · t, heads · d], weights [N, heads, t, t] | null }.
 */
export function rowAttention(attn, q, k, v, { n, t, heads, d, causal, ctx }) {
  const split = (part) => splitHeads(part.data, n, t, heads, d, part.rowWidth, part.offset);
  const options = { needWeights: ctx.needWeights, out: ctx.weightsOut ? { weights: ctx.weightsOut } : undefined };
  let result;
  if (ctx.cache) {
    // Generation: the new keys and values join the cache, the queries attend to all it holds.
    ctx.cache.append(split(k), split(v));
    result = ctx.cache.attend(split(q), { ...options, isCausal: causal });
  } else {
    const mask = paddingMask(ctx.attentionMask, n, t, causal);
    result = attn.scaledDotProductAttention(split(q), split(k), split(v), { ...options, ...(mask ? { attnMask: mask } : { isCausal: causal }) });
  }
  const { output, weights } = result;
  if (ctx.headMask) {
    // (m · w) v = m · (w v): the head's output and weights scaled alike.
    scaleHeads(output.data, n, heads, ctx.headMask);
    if (weights) scaleHeads(weights.data, n, heads, ctx.headMask);
  }
  return { output: mergeHeads(output.data, n, t, heads, d), weights };
}
