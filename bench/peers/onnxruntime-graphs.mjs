// The ONNX graphs onnxruntime-web runs, built in JS with ../onnx-model.mjs. Each is the whole
// MultiheadAttention forward: x [1, L, E] -> out [1, L, E], weights as initializers.
import { encodeModel, floats, int64s } from '../onnx-model.mjs';
import { E, H, HEAD_DIM, matmulWeights } from '../problem.mjs';

const OUT = 'out';

// out = attended · W_out^T + b_out, attended [1, L, E].
const outputProjection = (attended) => [
  { op: 'MatMul', inputs: [attended, 'w_out_t'], outputs: ['projected'] },
  { op: 'Add', inputs: ['projected', 'b_out'], outputs: [OUT] },
];

// q/k/v [1, L, E] = x · W^T + b, one MatMul + Add each.
const inputProjections = () =>
  ['q', 'k', 'v'].flatMap((name) => [
    { op: 'MatMul', inputs: ['x', `w_${name}_t`], outputs: [`${name}_mm`] },
    { op: 'Add', inputs: [`${name}_mm`, `b_${name}`], outputs: [name] },
  ]);

function projectionWeights(w) {
  return {
    w_q_t: floats([E, E], w.qT), w_k_t: floats([E, E], w.kT), w_v_t: floats([E, E], w.vT),
    b_q: floats([E], w.bq), b_k: floats([E], w.bk), b_v: floats([E], w.bv),
  };
}

const model = (L, nodes, initializers, opsets) =>
  encodeModel({
    nodes,
    initializers: { ...initializers, w_out_t: floats([E, E], matmulWeights().outT), b_out: floats([E], matmulWeights().outBias) },  // out_proj
    inputs: [{ name: 'x', dims: [1, L, E] }],
    outputs: [{ name: OUT, dims: [1, L, E] }],
    opsets,
  });

/** The formulations, fastest usually first. Each: L -> ModelProto bytes. */
export const FORMULATIONS = {
  // com.microsoft Attention: packed QKV weights [E, 3E] and bias [3E]; unidirectional = causal.
  contrib(L) {
    const w = matmulWeights();
    return model(
      L,
      [
        { op: 'Attention', domain: 'com.microsoft', inputs: ['x', 'w_qkv', 'b_qkv'], outputs: ['attended'], attrs: { num_heads: H, unidirectional: 1 } },
        ...outputProjection('attended'),
      ],
      { w_qkv: floats([E, 3 * E], w.inT), b_qkv: floats([3 * E], w.inBias) },
      { '': 23, 'com.microsoft': 1 },
    );
  },

  // ai.onnx Attention (opset 23) on 3-D q/k/v with q_num_heads / kv_num_heads, is_causal.
  opset23(L) {
    return model(
      L,
      [
        ...inputProjections(),
        { op: 'Attention', inputs: ['q', 'k', 'v'], outputs: ['attended'], attrs: { q_num_heads: H, kv_num_heads: H, is_causal: 1 } },
        ...outputProjection('attended'),
      ],
      projectionWeights(matmulWeights()),
      { '': 23 },
    );
  },

  // Decomposed: heads by Reshape/Transpose, softmax(Q·K^T / sqrt(d) + causal mask) · V.
  decomposed(L) {
    const mask = new Float32Array(L * L);
    for (let i = 0; i < L; ++i) mask.fill(-Infinity, i * L + i + 1, (i + 1) * L);
    return model(
      L,
      [
        ...inputProjections(),
        { op: 'Reshape', inputs: ['q', 'heads_shape'], outputs: ['q_split'] },  // [L, H, D]
        { op: 'Reshape', inputs: ['k', 'heads_shape'], outputs: ['k_split'] },
        { op: 'Reshape', inputs: ['v', 'heads_shape'], outputs: ['v_split'] },
        { op: 'Transpose', inputs: ['q_split'], outputs: ['q_heads'], attrs: { perm: [1, 0, 2] } },  // [H, L, D]
        { op: 'Transpose', inputs: ['k_split'], outputs: ['k_heads_t'], attrs: { perm: [1, 2, 0] } },  // [H, D, L]
        { op: 'Transpose', inputs: ['v_split'], outputs: ['v_heads'], attrs: { perm: [1, 0, 2] } },
        { op: 'MatMul', inputs: ['q_heads', 'k_heads_t'], outputs: ['scores'] },  // [H, L, L]
        { op: 'Mul', inputs: ['scores', 'scale'], outputs: ['scaled'] },
        { op: 'Add', inputs: ['scaled', 'causal_mask'], outputs: ['masked'] },
        { op: 'Softmax', inputs: ['masked'], outputs: ['probs'], attrs: { axis: -1 } },
        { op: 'MatMul', inputs: ['probs', 'v_heads'], outputs: ['heads'] },  // [H, L, D]
        { op: 'Transpose', inputs: ['heads'], outputs: ['heads_t'], attrs: { perm: [1, 0, 2] } },  // [L, H, D]
        { op: 'Reshape', inputs: ['heads_t', 'merged_shape'], outputs: ['attended'] },  // [1, L, E]
        ...outputProjection('attended'),
      ],
      {
        ...projectionWeights(matmulWeights()),
        heads_shape: int64s([L, H, HEAD_DIM]),
        merged_shape: int64s([1, L, E]),
        scale: floats([], Float32Array.of(1 / Math.sqrt(HEAD_DIM))),
        causal_mask: floats([L, L], mask),
      },
      { '': 23 },
    );
  },
};

/** C [M, N] = A [M, K] · B [K, N], B an initializer: the onnxruntime-web-gemm row. */
export function gemmModel(M, N, K) {
  const b = new Float32Array(K * N);
  for (let i = 0; i < b.length; ++i) b[i] = Math.cos(i);
  return encodeModel({
    nodes: [{ op: 'MatMul', inputs: ['a', 'b'], outputs: ['c'] }],
    initializers: { b: floats([K, N], b) },
    inputs: [{ name: 'a', dims: [M, K] }],
    outputs: [{ name: 'c', dims: [M, N] }],
  });
}
