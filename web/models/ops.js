// The small row-wise operations of a transformer that the package does not run: norms,
// activations, embedding lookups, residual sums. Plain JS over Float32Arrays of rows; no DOM (the
// page's worker, the tests and the benchmarks all run them).

/** Row-wise x / sqrt(mean(x²) + eps) · w (Llama's RMSNorm), or · (1 + w) with `unitOffset` (Gemma's). */
export function rmsNorm(x, w, width, eps, unitOffset = false, out = new Float32Array(x.length)) {
  for (let row = 0; row < x.length; row += width) {
    let squares = 0;
    for (let i = 0; i < width; i++) squares += x[row + i] * x[row + i];
    const inverse = 1 / Math.sqrt(squares / width + eps);
    for (let i = 0; i < width; i++) out[row + i] = x[row + i] * inverse * (unitOffset ? 1 + w[i] : w[i]);
  }
  return out;
}

/** Row-wise (x − mean) / sqrt(var + eps) · w + b: torch.nn.LayerNorm (biased variance). */
export function layerNorm(x, w, b, width, eps) {
  const out = new Float32Array(x.length);
  for (let row = 0; row < x.length; row += width) {
    let sum = 0;
    for (let i = 0; i < width; i++) sum += x[row + i];
    const mean = sum / width;
    let squares = 0;
    for (let i = 0; i < width; i++) squares += (x[row + i] - mean) ** 2;
    const inverse = 1 / Math.sqrt(squares / width + eps);
    for (let i = 0; i < width; i++) out[row + i] = (x[row + i] - mean) * inverse * w[i] + b[i];
  }
  return out;
}

// Activations by their Hugging Face names (ACT2FN), in place.
const ACTIVATIONS = {
  silu: (v) => v / (1 + Math.exp(-v)),
  gelu: (v) => 0.5 * v * erfc(-v / Math.SQRT2),
  gelu_new: geluTanh,
  gelu_pytorch_tanh: geluTanh,
};

function geluTanh(v) {
  return 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
}

// erfc with a relative error below 1.2e-7 everywhere (Numerical Recipes' erfcc, a Chebyshev fit):
// JS has no Math.erf, and GELU written as x · erfc(−x/√2) / 2 keeps that relative accuracy even
// where it is tiny (x very negative), inside the float32 rounding the checks allow.
function erfc(x) {
  const z = Math.abs(x), t = 1 / (1 + 0.5 * z);
  const r = t * Math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
    + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0 ? r : 2 - r;
}

/** The names `activate` knows (config.json's hidden_act / activation_function). */
export const ACTIVATION_NAMES = Object.keys(ACTIVATIONS);

/** x[i] = act(x[i]) in place; returns x. */
export function activate(x, name) {
  const f = ACTIVATIONS[name];
  for (let i = 0; i < x.length; i++) x[i] = f(x[i]);
  return x;
}

/** x += y, element-wise, in place. */
export function addInto(x, y) {
  for (let i = 0; i < x.length; i++) x[i] += y[i];
  return x;
}

/** The float of binary16 bits h. */
export function halfToFloat(h) {
  const exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  const magnitude = exponent === 0 ? mantissa * 2 ** -24 : exponent === 31 ? (mantissa ? NaN : Infinity) : (1 + mantissa / 1024) * 2 ** (exponent - 15);
  return h & 0x8000 ? -magnitude : magnitude;
}

/** A tensor's values as a Float32Array: float32 as it is, binary16 (dtype 'f16') widened. */
export function floats(tensor) {
  return tensor.dtype === 'f16' ? Float32Array.from(tensor.data, halfToFloat) : tensor.data;
}

/** Rows `ids` of a [vocab, width] table (float32 or binary16) as [ids.length, width], times `scale`. */
export function embed(table, ids, width, scale = 1) {
  const out = new Float32Array(ids.length * width);
  for (let i = 0; i < ids.length; i++) {
    const row = table.data.subarray(ids[i] * width, (ids[i] + 1) * width);
    for (let e = 0; e < width; e++) out[i * width + e] = (table.dtype === 'f16' ? halfToFloat(row[e]) : row[e]) * scale;
  }
  return out;
}

/**
 * The output head over the final hidden rows x [t, width], as forward()'s `logits` option asks:
 * 'all' rows [t, vocab], 'last' the last row only [1, vocab] (what generation reads: a 49152-word
 * head over 512 rows is a 100 MB result), or 'none' (null).
 */
export function headRows(head, x, t, width, logits) {
  if (logits === 'none') return null;
  const rows = logits === 'last' ? x.subarray((t - 1) * width) : x;
  return head.forward({ data: rows, shape: [rows.length / width, width] }).data;
}

/** [t, heads · d] rows as [1, heads, t, d] blocks, the layout attention takes; `offset` picks a slice of wider rows. */
export function splitHeads(x, t, heads, d, rowWidth = heads * d, offset = 0) {
  const out = new Float32Array(heads * t * d);
  for (let i = 0; i < t; i++)
    for (let h = 0; h < heads; h++) out.set(x.subarray(i * rowWidth + offset + h * d, i * rowWidth + offset + (h + 1) * d), (h * t + i) * d);
  return { data: out, shape: [1, heads, t, d] };
}

/** [1, heads, t, d] blocks back to [t, heads · d] rows. */
export function mergeHeads(x, t, heads, d) {
  const out = new Float32Array(heads * t * d);
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < t; i++) out.set(x.subarray((h * t + i) * d, (h * t + i + 1) * d), (i * heads + h) * d);
  return out;
}

/**
 * The `out` option of layer `layer`'s attention call when a forward writes every layer's weights
 * into one array `into` [layers · heads, t, t] (undefined without one, or without weights: the
 * call makes its own, or none).
 */
export function layerOut(into, needWeights, layer, heads, t) {
  return into && needWeights ? { weights: into.subarray(layer * heads * t * t, (layer + 1) * heads * t * t) } : undefined;
}

/**
 * What a GroupedQueryAttention block reads from its input [t, width] and how it scores (a model's
 * attentionParts, the neuron view's numbers): { query [1, heads, t, d], key, value [1, kvHeads,
 * t, d] } (q and k after the QK-norm and RoPE at `positions`, default 0 … t − 1:
 * GroupedQueryAttention.project), scale, softcap, window, causal, about (a line saying what q and
 * k are). Some rows of a text at their own `positions` rotate as in the whole text's forward only
 * where RoPE's frequencies do not depend on the length a call covers (not 'dynamic' or
 * 'longrope'): as the trained model's, whose pictures project a window's rows.
 */
export function blockParts(attention, input, width, positions = undefined) {
  return {
    ...attention.project({ data: input, shape: [1, input.length / width, width] }, { positions }),
    scale: attention.scale ?? 1 / Math.sqrt(attention.headDim), softcap: attention.softcap, window: attention.slidingWindow, causal: true,
    about: `q and k after ${attention.qkNorm ? 'QK-norm and ' : ''}RoPE`,
  };
}
