// The benchmark problem: causal self-attention through torch.nn.MultiheadAttention (E = 512,
// H = 8, N = 1, with biases), and the weights and input every implementation uses. They are
// built exactly as bench/native_attention.cpp builds them, in float32:
//   in_proj_weight[i] = 0.05·sin(i), in_proj_bias[i] = 0.01·cos(i),
//   out_proj.weight[i] = 0.05·cos(i), out_proj.bias[i] = 0.01·sin(i), x[i] = sin(0.37·i).

export const E = 512;
export const H = 8;
export const HEAD_DIM = E / H;

const f = Math.fround;

function fill(length, value) {
  const out = new Float32Array(length);
  for (let i = 0; i < length; ++i) out[i] = value(i);
  return out;
}

let cached;
/** PyTorch's parameters (in_proj_weight is [3E, E]: rows are output features). */
export function parameters() {
  cached ??= {
    inProjWeight: fill(3 * E * E, (i) => f(f(0.05) * f(Math.sin(i)))),
    inProjBias: fill(3 * E, (i) => f(f(0.01) * f(Math.cos(i)))),
    outProjWeight: fill(E * E, (i) => f(f(0.05) * f(Math.cos(i)))),
    outProjBias: fill(E, (i) => f(f(0.01) * f(Math.sin(i)))),
  };
  return cached;
}

/** The input x [L, N = 1, E], flat. */
export function input(L) {
  return fill(L * E, (i) => f(Math.sin(f(f(0.37) * i))));
}

/** The PyTorch state_dict our MultiheadAttention loads. */
export function stateDict() {
  const p = parameters();
  return {
    in_proj_weight: { data: p.inProjWeight, shape: [3 * E, E] },
    in_proj_bias: { data: p.inProjBias, shape: [3 * E] },
    'out_proj.weight': { data: p.outProjWeight, shape: [E, E] },
    'out_proj.bias': { data: p.outProjBias, shape: [E] },
  };
}

/** a [rows, cols] -> [cols, rows]: PyTorch's Linear weights as MatMul's right operand. */
export function transpose(a, rows, cols) {
  const out = new Float32Array(a.length);
  for (let r = 0; r < rows; ++r) for (let c = 0; c < cols; ++c) out[c * rows + r] = a[r * cols + c];
  return out;
}

let cachedMatmul;
/** The weights as ONNX and tfjs use them: x · W_in^T as MatMul(x, W_in_t) with W_in_t [E, 3E]. */
export function matmulWeights() {
  return (cachedMatmul ??= buildMatmulWeights());
}

function buildMatmulWeights() {
  const p = parameters();
  const inT = transpose(p.inProjWeight, 3 * E, E);  // [E, 3E]: columns 0..E are Q, then K, then V
  const slice = (part) => {  // [E, E] columns of one of Q, K, V
    const out = new Float32Array(E * E);
    for (let r = 0; r < E; ++r) out.set(inT.subarray(r * 3 * E + part * E, r * 3 * E + (part + 1) * E), r * E);
    return out;
  };
  return {
    inT,
    qT: slice(0), kT: slice(1), vT: slice(2),
    bq: p.inProjBias.slice(0, E), bk: p.inProjBias.slice(E, 2 * E), bv: p.inProjBias.slice(2 * E),
    inBias: p.inProjBias,
    outT: transpose(p.outProjWeight, E, E),
    outBias: p.outProjBias,
  };
}

/** FLOPs of one forward: projections 4·2·L·E² + attention 2·2·L²·E (causal counted as full). */
export function flops(L) {
  return 4 * 2 * L * E * E + 2 * 2 * L * L * E;
}

/** max |a - b| over the first `count` values (all of them by default); NaN counts as Infinity. */
export function maxAbsError(a, b, count = Math.max(a.length, b.length)) {
  if (a.length < count || b.length < count) return Infinity;
  let worst = 0;
  for (let i = 0; i < count; ++i) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= worst)) worst = Number.isNaN(d) ? Infinity : d;
  }
  return worst;
}
