// Pieces every family builds its layers from: a Linear over a checkpoint's weight as stored.

/** The sizes of a config.json in BERT's and GPT-NeoX's names, as many key/value heads as query heads. */
export function multiHeadSizes(config) {
  const heads = config.num_attention_heads, width = config.hidden_size;
  return { layers: config.num_hidden_layers, heads, kvHeads: heads, width, headDim: width / heads, inner: config.intermediate_size };
}

/**
 * A Linear over tensors `${name}.weight` [out, in] (and `${name}.bias` when the Map holds it), in
 * the weight's dtype: bf16 and f16 weights stay 16-bit.
 */
export function linearFrom(attn, tensors, name) {
  const weight = tensors.get(`${name}.weight`);
  const bias = tensors.get(`${name}.bias`);
  const [out, inFeatures] = weight.shape;
  const linear = new attn.Linear(inFeatures, out, { bias: bias !== undefined, dtype: weight.dtype ?? 'f32' });
  try {
    return linear.loadStateDict(bias ? { weight, bias } : { weight });
  } catch (error) {
    linear.dispose();
    throw error;
  }
}

/** An output head over a Linear: forward(x, rows) → logits [rows, vocab], soft-capped when `softcap`. */
export function linearHead(linear, softcap = null) {
  return {
    forward(x, rows) {
      const logits = linear.forward({ data: x, shape: [rows, linear.inFeatures] }).data;
      if (softcap) for (let i = 0; i < logits.length; i++) logits[i] = Math.tanh(logits[i] / softcap) * softcap;
      return logits;
    },
  };
}

/**
 * What a GroupedQueryAttention block reads from its input rows [N · t, width] and how it scores:
 * { query [N, heads, t, d], key, value [N, kvHeads, t, d] (after QK-norm and RoPE at `positions`
 * [N · t]), scale, softcap, window, causal }.
 */
export function attentionParts(attention, input, n, t, width, positions) {
  const parts = attention.project({ data: input, shape: [n, t, width] }, { positions: { data: positions, shape: [n, t] } });
  return { ...parts, scale: attention.scale ?? 1 / Math.sqrt(attention.headDim), softcap: attention.softcap ?? null, window: attention.slidingWindow ?? null, causal: true };
}
