// The small row-wise operations of a transformer that the wasm modules do not run: norms,
// activations, residual sums, heads split and merged. Plain JS over Float32Arrays of rows.

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

/** [N · t, heads · d] rows as [N, heads, t, d] blocks, the layout attention takes; `offset` picks a slice of wider rows. */
export function splitHeads(x, n, t, heads, d, rowWidth = heads * d, offset = 0) {
  const out = new Float32Array(n * heads * t * d);
  for (let b = 0; b < n; b++)
    for (let i = 0; i < t; i++) {
      const row = (b * t + i) * rowWidth + offset;
      for (let h = 0; h < heads; h++) out.set(x.subarray(row + h * d, row + (h + 1) * d), ((b * heads + h) * t + i) * d);
    }
  return { data: out, shape: [n, heads, t, d] };
}

/** [N, heads, t, d] blocks back to [N · t, heads · d] rows. */
export function mergeHeads(x, n, t, heads, d) {
  const out = new Float32Array(n * heads * t * d);
  for (let b = 0; b < n; b++)
    for (let h = 0; h < heads; h++)
      for (let i = 0; i < t; i++) out.set(x.subarray(((b * heads + h) * t + i) * d, ((b * heads + h) * t + i + 1) * d), ((b * t + i) * heads + h) * d);
  return out;
}

/** Each head's block of x [N, heads, rows, cols] times its mask value, in place (HF's head_mask). */
export function scaleHeads(x, n, heads, mask) {
  const block = x.length / (n * heads);
  for (let b = 0; b < n; b++)
    for (let h = 0; h < heads; h++) {
      if (mask[h] === 1) continue;
      const start = (b * heads + h) * block;
      for (let i = start; i < start + block; i++) x[i] *= mask[h];
    }
  return x;
}
